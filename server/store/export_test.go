package store

import "slices"

// BatcherState is what a Batcher holds between transactions: whether one is in
// progress and how many writes wait for the next.
func BatcherState(b *Batcher) (busy bool, pending int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.busy, len(b.pending)
}

// HeldRows returns the IDs of the rows b holds, and sets how many it may hold when
// limit is positive.
func HeldRows(b *Batcher, limit int) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if limit > 0 {
		b.heldLimit = limit
	}
	ids := make([]string, 0, len(b.held))
	for id := range b.held {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}
