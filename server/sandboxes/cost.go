package sandboxes

import (
	"math"
	"time"

	"github.com/different-ai/differently/server/store"
)

// Cost estimates what sandbox sb has cost so far from its pool's current cost
// model; false when the sandbox has no pool or the pool has no view. The API's
// sandbox answers and the console show this same figure.
func (s *Service) Cost(sb store.Sandbox) (float64, bool) {
	if sb.Pool == "" {
		return 0, false
	}
	v, ok := s.pools.View(sb.Pool)
	if !ok {
		return 0, false
	}
	return EstimateCost(sb, v.Pool.CostModel, s.now()), true
}

// EstimateCost prices a sandbox from a cost model and its requested resources, for
// every hour since it was created (queueing included, which keeps the figure simple
// and never under the truth) until it reached a terminal state. It is an estimate: a
// changed cost model reprices the whole life of the sandbox, and a backend that bills
// by real usage will differ.
func EstimateCost(sb store.Sandbox, m store.CostModel, now time.Time) float64 {
	end := now
	if sb.State.IsTerminal() {
		end = sb.StateChangedAt
	}
	hours := end.Sub(sb.CreatedAt).Hours()
	if hours <= 0 {
		return 0
	}
	perHour := m.CPUHour*sb.Resources.CPU + m.MemoryGiBHour*float64(sb.Resources.MemoryMiB)/1024
	return saturate(hours * perHour)
}

// saturate keeps a figure finite, which JSON requires: past the largest float64 it
// is that. Only rows stored before the bounds of api/limits.go, or an extravagant
// cost model, come near it.
func saturate(f float64) float64 {
	if f > math.MaxFloat64 {
		return math.MaxFloat64
	}
	return f
}
