package adapters

// Capacity is an adapter's free capacity now.
type Capacity struct {
	// Bounded false means the adapter has no meaningful limit; the pool's
	// maxConcurrency governs instead and the other fields are ignored.
	Bounded       bool    `json:"bounded"`
	FreeCPU       float64 `json:"freeCPU,omitempty"`
	FreeMemoryMiB int64   `json:"freeMemoryMiB,omitempty"`
	// LargestFreeCPU and LargestFreeMemoryMiB describe the roomiest single node, so
	// that free capacity scattered over many nodes is not mistaken for room. Adapters
	// with one node may leave them zero; Fits then uses the totals.
	LargestFreeCPU       float64 `json:"largestFreeCPU,omitempty"`
	LargestFreeMemoryMiB int64   `json:"largestFreeMemoryMiB,omitempty"`
}

// Fits reports whether one sandbox with resources r can be placed now. Callers pass the
// resources the sandbox will really hold, defaults filled in: a zero request fits
// anywhere.
func (c Capacity) Fits(r Resources) bool {
	if !c.Bounded {
		return true
	}
	return r.CPU <= roomiest(c.LargestFreeCPU, c.FreeCPU) &&
		r.MemoryMiB <= roomiest(c.LargestFreeMemoryMiB, c.FreeMemoryMiB)
}

// roomiest picks the single-node figure when the adapter filled it in. A zero
// largest value beside a positive total cannot be a real reading (some node holds
// that free room), so it means "not reported".
func roomiest[T float64 | int64](largest, total T) T {
	if largest > 0 || total <= 0 {
		return min(largest, total)
	}
	return total
}
