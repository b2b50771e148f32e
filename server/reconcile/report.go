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
	// Errors lists the actions of this pass that failed (a Delete the backend
	// refused, say); the next pass tries them again.
	Errors []string `json:"errors,omitempty"`
}

// Report is one reconcile pass over every pool.
type Report struct {
	Pools []PoolReport `json:"pools"`
}

// logAttrs sums the report over its pools for one log line.
func (r Report) logAttrs() []any {
	var skipped, orphans, adopted, requeued, lost, changed, duplicates int
	for _, p := range r.Pools {
		if p.Skipped != "" {
			skipped++
		}
		orphans += len(p.OrphansDeleted)
		adopted += len(p.Adopted)
		requeued += len(p.Requeued)
		lost += len(p.Lost)
		changed += len(p.StateChanged)
		duplicates += len(p.Duplicates)
	}
	return []any{"pools", len(r.Pools), "skipped", skipped, "orphansDeleted", orphans,
		"adopted", adopted, "requeued", requeued, "lost", lost, "stateChanged", changed,
		"duplicates", duplicates}
}
