package adapters

import (
	"slices"
	"strings"

	"github.com/different-ai/differently/api"
)

// Feature names a pool can advertise and a sandbox can request.
const (
	FeatureExec            = "exec"
	FeatureExecStream      = "exec.stream"
	FeatureExecStdin       = "exec.stdin"
	FeatureFiles           = "files"
	FeatureStopStart       = "lifecycle.stop-start"
	FeaturePersistenceDisk = "persistence.disk"
	FeaturePauseResume     = "lifecycle.pause-resume"
	FeatureSnapshotsDisk   = "snapshots.disk"
	FeatureSnapshotsMemory = "snapshots.memory"
	FeatureFork            = "fork"
	FeaturePortsExpose     = "ports.expose"

	// A command on a terminal of its own (PTYExec).
	FeaturePTY = "pty"

	// Reserved: no adapter offers them yet, so requests for them find no pool.
	FeatureSSH = "ssh"
	FeatureGPU = "gpu"

	// Declaration only: advertised as configured, never checked against an interface.
	FeatureEgressControl = "network.egress-control"
	FeatureArchAMD64     = "arch.amd64"
	FeatureArchARM64     = "arch.arm64"
	FeatureMicroVM       = "isolation.microvm"
	FeatureContainer     = "isolation.container"
	// FeatureIsolationNone describes a pool with no isolation. It can be declared but
	// never requested: nobody should be able to ask for less isolation.
	FeatureIsolationNone = "isolation.none"
)

// featureInterface says which optional interface backs a feature; declaration-only
// features have none. FeatureExec is backed by ExecutionAdapter itself.
var featureInterface = map[string]func(ExecutionAdapter) bool{
	FeatureExec:            func(ExecutionAdapter) bool { return true },
	FeatureExecStream:      implements[Streamer],
	FeatureExecStdin:       implements[StdinStreamer],
	FeatureFiles:           implements[FileSystem],
	FeatureStopStart:       implements[Lifecycle],
	FeaturePersistenceDisk: implements[Lifecycle],
	FeaturePauseResume:     implements[Pauser],
	FeatureSnapshotsDisk:   implements[Snapshotter],
	FeatureSnapshotsMemory: implements[Snapshotter],
	FeatureFork:            implements[Snapshotter],
	FeaturePortsExpose:     implements[PortExposer],
	FeatureSSH:             nil,
	FeaturePTY:             implements[PTYExec],
	FeatureGPU:             nil,
	FeatureEgressControl:   nil,
	FeatureArchAMD64:       nil,
	FeatureArchARM64:       nil,
	FeatureMicroVM:         nil,
	FeatureContainer:       nil,
	FeatureIsolationNone:   nil,
}

func implements[I any](a ExecutionAdapter) bool {
	_, ok := a.(I)
	return ok
}

// AllFeatures returns every known feature name, sorted.
func AllFeatures() []string {
	out := make([]string, 0, len(featureInterface))
	for name := range featureInterface {
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}

// KnownFeature reports whether name is a feature name of this contract version.
func KnownFeature(name string) bool {
	_, ok := featureInterface[name]
	return ok
}

// EffectiveFeatures returns the declared features a can actually serve, sorted and
// without duplicates. It drops a feature only when the optional interface backing it
// is missing; unknown names are dropped too (an adapter from a newer contract may
// declare names this build cannot use). Declaration-only names pass through.
func EffectiveFeatures(a ExecutionAdapter, declared []string) []string {
	out := make([]string, 0, len(declared))
	for _, name := range declared {
		check, known := featureInterface[name]
		if !known || (check != nil && !check(a)) {
			continue
		}
		out = append(out, name)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Supports reports whether a serves feature given the declared list: the feature is
// declared and its interface implemented. Optional operations are checked with it at
// call time.
func Supports(a ExecutionAdapter, declared []string, feature string) bool {
	return slices.Contains(EffectiveFeatures(a, declared), feature)
}

// ValidateRequestedFeatures checks the capability names of a sandbox request: every
// name must be known, and isolation.none cannot be asked for. It returns the names
// sorted and without duplicates.
func ValidateRequestedFeatures(names []string) ([]string, error) {
	var unknown []string
	for _, name := range names {
		if name == FeatureIsolationNone {
			return nil, InvalidRequest("capability %q cannot be requested", FeatureIsolationNone)
		}
		if !KnownFeature(name) {
			unknown = append(unknown, name)
		}
	}
	if len(unknown) > 0 {
		return nil, api.Errorf(api.CodeInvalidRequest, "unknown capabilities: %s", strings.Join(unknown, ", ")).
			WithDetail("unknown", unknown)
	}
	out := slices.Clone(names)
	slices.Sort(out)
	return slices.Compact(out), nil
}

// ValidateDeclaredFeatures checks the feature names an operator lists for a pool.
// Unlike requests, isolation.none may be declared.
func ValidateDeclaredFeatures(names []string) error {
	var unknown []string
	for _, name := range names {
		if !KnownFeature(name) {
			unknown = append(unknown, name)
		}
	}
	if len(unknown) > 0 {
		return api.Errorf(api.CodeInvalidRequest, "unknown features: %s", strings.Join(unknown, ", ")).
			WithDetail("unknown", unknown)
	}
	return nil
}
