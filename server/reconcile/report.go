// Package reconcile keeps the database and the backends in agreement: the leader
// lists every pool's instances and compares them with the sandboxes the database
// places there (adapter specification, section 6).
package reconcile

// PoolReport is what one pass found and did on one pool. Entries are sandbox IDs,
// except OrphansDeleted, which holds backend refs.
type PoolReport struct {
	Pool string `json:"pool"`
	// Skipped says why the pool was left alone this pass (List failed, no adapter).
	Skipped        string   `json:"skipped,omitempty"`
	OrphansDeleted []string `json:"orphansDeleted,omitempty"`
	Adopted        []string `json:"adopted,omitempty"`
	Requeued       []string `json:"requeued,omitempty"`
	Lost           []string `json:"lost,omitempty"`
	StateChanged   []string `json:"stateChanged,omitempty"`
	Duplicates     []string `json:"duplicates,omitempty"`
}

// Report is one reconcile pass over every pool.
type Report struct {
	Pools []PoolReport `json:"pools"`
}
