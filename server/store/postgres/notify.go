package postgres

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/different-ai/differently/server/store"
)

// maxPayload keeps a NOTIFY payload under PostgreSQL's 8000-byte limit.
const maxPayload = 7000

// notifyTimeout bounds one NOTIFY; a database that does not answer in that time
// loses the batch, which listeners survive (see notifier).
const notifyTimeout = 10 * time.Second

// notifyGap is the least time between two NOTIFYs of one replica. A change that
// queues within it of the last NOTIFY waits for its end, and goes out with the
// others that queued meanwhile: under load one NOTIFY carries many changes where
// each would take a transaction of its own, which cost a fifth of a paced create's
// latency at 650 a second on two CPUs (docs/benchmarks.md). Listeners, this
// replica's own included, hear a change up to notifyGap later.
const notifyGap = 2 * time.Millisecond

// notifier announces this replica's committed sandbox changes on the schema's
// channel. Writers hand it changes after their commit; its goroutine sends what
// queued in as few NOTIFY statements as fit, each in a transaction of its own that
// writes nothing, at most one every notifyGap. That keeps NOTIFY, whose commits
// PostgreSQL serialises, out of the writing transactions. A change committed by a
// replica that dies before announcing it is heard by nobody: waiters find it on
// their timeout and the scheduler on its tick, as when the feed is down.
type notifier struct {
	s       *Store
	channel string
	// gap is notifyGap, in nanoseconds; a test lengthens it.
	gap atomic.Int64

	mu      sync.Mutex
	pending []string
	wake    chan struct{}
	stop    context.CancelFunc
	done    chan struct{}
}

func (s *Store) startNotifier() {
	n := &notifier{s: s, channel: s.channel, wake: make(chan struct{}, 1), done: make(chan struct{})}
	n.gap.Store(int64(notifyGap))
	runCtx, stop := context.WithCancel(context.Background())
	n.stop = stop
	s.notify = n
	go n.run(runCtx)
}

// sandbox queues the announcement of a sandbox's new state: "s <id> <state>", and
// " c" when the row is claimed.
func (n *notifier) sandbox(sb store.Sandbox) {
	line := "s " + sb.ID + " " + string(sb.State)
	if sb.ClaimedBy != "" {
		line += " c"
	}
	n.mu.Lock()
	n.pending = append(n.pending, line)
	n.mu.Unlock()
	select {
	case n.wake <- struct{}{}:
	default:
	}
}

// written announces the rows of an update whose state changed.
func (n *notifier) written(before, after store.Sandbox) {
	if before.State != after.State {
		n.sandbox(after)
	}
}

func (n *notifier) run(ctx context.Context) {
	defer close(n.done)
	gap := time.NewTimer(time.Hour)
	gap.Stop()
	for {
		select {
		case <-ctx.Done():
			// What queued before Close is still announced, within the timeout.
			n.flush(context.Background())
			return
		case <-n.wake:
			n.flush(ctx)
		}
		gap.Reset(time.Duration(n.gap.Load()))
		select {
		case <-gap.C:
		case <-ctx.Done():
		}
	}
}

// notifySQL sends a payload on a channel: the change feed's lines, after each write.
const notifySQL = `SELECT pg_notify($1, $2)`

func (n *notifier) flush(ctx context.Context) {
	n.mu.Lock()
	lines := n.pending
	n.pending = nil
	n.mu.Unlock()
	for len(lines) > 0 {
		var b strings.Builder
		for len(lines) > 0 && (b.Len() == 0 || b.Len()+1+len(lines[0]) <= maxPayload) {
			if b.Len() > 0 {
				b.WriteByte('\n')
			}
			b.WriteString(lines[0])
			lines = lines[1:]
		}
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), notifyTimeout)
		_, _ = n.s.pool.Exec(cctx, notifySQL, n.channel, b.String())
		cancel()
	}
}

// close stops the goroutine once it has announced what queued.
func (n *notifier) close() {
	n.stop()
	<-n.done
}
