package store

// BatcherState is what a Batcher holds between transactions: whether one is in
// progress and how many writes wait for the next.
func BatcherState(b *Batcher) (busy bool, pending int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.busy, len(b.pending)
}
