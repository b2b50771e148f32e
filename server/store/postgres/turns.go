package postgres

import "sync"

// turns lets concurrent callers share round trips (creates, reads): a caller that
// finds none in flight leads at once, alone; callers arriving meanwhile wait, and
// when the round trip in progress ends, the oldest of them leads the next one with
// what waits then. T is a waiting caller; how a batch is sent, and how a caller is
// told its result or that it leads, is the user's.
type turns[T any] struct {
	mu      sync.Mutex
	busy    bool
	pending []T

	// Tests only: queued, when set, is called under the lock with the number of
	// callers waiting after one joins, and sent with the size of each batch taken.
	queued func(n int)
	sent   func(n int)
}

// join queues t and reports whether its caller leads now: nothing was in flight.
func (q *turns[T]) join(t T) (lead bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.pending = append(q.pending, t)
	lead = !q.busy
	q.busy = true
	if q.queued != nil {
		q.queued(len(q.pending))
	}
	return lead
}

// take removes the leader's batch from what waits: pick splits it into the batch
// and the rest, which stays queued in its order.
func (q *turns[T]) take(pick func(pending []T) (batch, rest []T)) []T {
	q.mu.Lock()
	batch, rest := pick(q.pending)
	q.pending = rest
	sent := q.sent
	q.mu.Unlock()
	if sent != nil {
		sent(len(batch))
	}
	return batch
}

// next returns the oldest waiting caller, which is to lead the next round trip and
// stays queued until it takes its batch; ok is false, and the busy period over,
// when none waits.
func (q *turns[T]) next() (t T, ok bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.pending) == 0 {
		q.busy = false
		return t, false
	}
	return q.pending[0], true
}

// hook sets the tests' hooks.
func (q *turns[T]) hook(queued, sent func(n int)) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.queued, q.sent = queued, sent
}

// oldest is a pick of at most n of the oldest waiting.
func oldest[T any](n int) func([]T) ([]T, []T) {
	return func(pending []T) ([]T, []T) {
		k := min(len(pending), n)
		return pending[:k:k], append([]T(nil), pending[k:]...)
	}
}

// await returns a caller's result from done once its turn came: a leader sends its
// batch (flush) at once; a waiting caller gets its result from done, or is told
// there (leads) to send the next batch, which holds its own.
func await[R any](lead bool, done <-chan R, leads func(R) bool, flush func()) R {
	var r R
	if !lead {
		r = <-done
	}
	if lead || leads(r) {
		flush()
		r = <-done
	}
	return r
}
