package placement

import (
	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/server/store"
)

// Request is what placement needs of a sandbox.
type Request struct {
	// Capabilities are validated feature names (adapters.ValidateRequestedFeatures),
	// profile capabilities included.
	Capabilities []string
	Template     string
	Resources    adapters.Resources
	Placement    store.Placement
	// SnapshotPool, when set, is the only pool that can restore the sandbox's
	// fromSnapshot: snapshots restore on the adapter that took them.
	SnapshotPool string
}

// Decision is the outcome of placement.
type Decision struct {
	// Pools are the pools that can take the sandbox now, best first. Empty when none.
	Pools []string
	// Wait is set when no pool can take the sandbox now but some could later (a full
	// or unhealthy pool): the sandbox stays queued.
	Wait bool
	// Code classifies a decision with no pool and no waiting:
	// api.CodeUnsupportedCapability when capabilities are the only reason,
	// api.CodeInvalidRequest otherwise.
	Code api.Code
	// Reason says in words why the sandbox waits or cannot be placed.
	Reason string
	// Rejected gives each pool that was ruled out and why.
	Rejected map[string]string
}
