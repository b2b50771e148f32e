package pools

import (
	"slices"
	"time"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/server/store"
)

// View is what one replica knows about a pool: its stored definition, its adapter and
// the result of the last probe. Views are values; a refresh replaces them.
type View struct {
	Pool store.Pool
	// Adapter is nil when the pool's adapter could not be built (an adapter kind this
	// build lacks, a bad config, a missing credential). Healthy is then false and
	// LastError says why; the pool's sandboxes can still be terminated in the store.
	Adapter adapters.ExecutionAdapter
	// KindMissing is set, with a nil Adapter, when this build has no adapter of the
	// pool's kind at all: unlike a bad config or a missing credential, nothing short
	// of another build makes the pool's instances reachable again.
	KindMissing bool
	Info        adapters.Info
	// Capabilities as declared, with Features already passed through
	// adapters.EffectiveFeatures.
	Capabilities adapters.Capabilities
	// AwaitingProbe is set while a built adapter has not yet answered Capabilities:
	// what the pool offers is not known, which is no reason to refuse it work.
	AwaitingProbe bool
	Capacity      adapters.Capacity
	// Trust is the effective trust: the operator's pool setting, never the adapter's claim.
	Trust       api.Trust
	Healthy     bool
	LastError   string
	LastProbeAt time.Time
	// Breaker is the pool's circuit breaker on this replica, as it stood when the
	// view was taken. Placement leaves a pool out while it is open, whatever Healthy
	// says: probes do not move it, Create outcomes do (Manager.EndCreate).
	Breaker BreakerStatus
}

// Supports reports whether the pool serves feature now. Optional operations check it
// before type-asserting the adapter.
func (v View) Supports(feature string) bool {
	return v.Adapter != nil && slices.Contains(v.Capabilities.Features, feature)
}
