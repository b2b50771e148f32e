// Package reconcile keeps the database and the backends in agreement: the leader
// lists every pool's instances and compares them with the sandboxes the database
// places there (adapter specification, section 6).
package reconcile

import "github.com/different-ai/differently/server/store"

// PoolReport is what one pass found and did on one pool (see
// store.ReconcilePoolReport, where it is defined so that every pass is recorded).
type PoolReport = store.ReconcilePoolReport

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
