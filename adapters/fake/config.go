package fake

import (
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/adapters/poolconfig"
	"github.com/different-ai/differently/api"
)

// Config shapes a fake adapter. The zero value is an unbounded, always healthy
// adapter declaring every feature it implements. The package documentation
// describes each setting under its pool config key.
type Config struct {
	TotalCPU       float64
	TotalMemoryMiB int64

	CreateLatency       time.Duration
	CreateErrors        []api.Code
	DropCreateResponses int
	ListError           bool
	HealthError         bool

	// Features nil means DefaultFeatures; an empty non-nil list declares nothing.
	Features  []string
	Templates []string
	Regions   []string

	MaxCPU       float64
	MaxMemoryMiB int64
	MaxDiskGiB   int64

	Region string
	// Trust is what Info claims; empty means private.
	Trust api.Trust

	// ExecFunc replaces the echo behaviour of Exec and ExecStream. It is called
	// without any lock held, so it may call back into the adapter.
	ExecFunc func(ctx context.Context, inst InstanceView, req api.ExecRequest) (api.ExecResult, error)
	// Sleep waits for CreateLatency. Nil means a timer that stops early, returning
	// ctx.Err(), when ctx is done. Tests inject an instant one.
	Sleep func(ctx context.Context, d time.Duration) error
}

// DefaultFeatures are the features declared when Config.Features is nil: every one
// backed by an interface the fake implements.
func DefaultFeatures() []string {
	return []string{
		adapters.FeatureExec,
		adapters.FeatureExecStream,
		adapters.FeatureFiles,
		adapters.FeatureStopStart,
		adapters.FeaturePersistenceDisk,
		adapters.FeaturePauseResume,
		adapters.FeatureSnapshotsDisk,
		adapters.FeatureSnapshotsMemory,
		adapters.FeatureFork,
		adapters.FeaturePortsExpose,
	}
}

// injectableCodes are the codes createErrors may name: the ones Create can
// legitimately return, so that injected faults exercise real scheduler paths.
var injectableCodes = []api.Code{
	api.CodeInsufficientCapacity,
	api.CodeSandboxFailed,
	api.CodeProviderUnavailable,
	api.CodeInvalidRequest,
	api.CodeInternal,
}

// FromConfig builds an adapter from pool config keys.
func FromConfig(cfg map[string]any) (*Adapter, error) {
	c, err := ParseConfig(cfg)
	if err != nil {
		return nil, err
	}
	return New(c), nil
}

// ParseConfig reads pool config keys (camelCase, decoded from YAML or JSON) into a
// Config. A nil or empty map gives the zero Config.
func ParseConfig(cfg map[string]any) (Config, error) {
	r := poolconfig.Read(Kind, cfg)
	c := Config{
		TotalCPU:       r.Float("totalCPU", 0),
		TotalMemoryMiB: r.Int("totalMemoryMiB", 0),
		ListError:      r.Bool("listError", false),
		HealthError:    r.Bool("healthError", false),
		Templates:      r.Strings("templates"),
		Regions:        r.Strings("regions"),
		MaxCPU:         r.Float("maxCPU", 0),
		MaxMemoryMiB:   r.Int("maxMemoryMiB", 0),
		MaxDiskGiB:     r.Int("maxDiskGiB", 0),
		Region:         r.String("region", ""),
	}
	if ms := r.Int("createLatencyMs", 0); ms > math.MaxInt64/int64(time.Millisecond) {
		r.Check("createLatencyMs", fmt.Errorf("%d ms is too long", ms))
	} else {
		c.CreateLatency = time.Duration(ms) * time.Millisecond
	}
	if n := r.Int("dropCreateResponses", 0); n > math.MaxInt32 {
		r.Check("dropCreateResponses", fmt.Errorf("%d is too large", n))
	} else {
		c.DropCreateResponses = int(n)
	}
	if r.Has("createErrors") {
		var err error
		c.CreateErrors, err = toCodes(r.Strings("createErrors"))
		r.Check("createErrors", err)
	}
	if r.Has("features") {
		c.Features = r.Strings("features")
		if c.Features != nil {
			r.Check("features", adapters.ValidateDeclaredFeatures(c.Features))
		}
	}
	if err := r.Err(); err != nil {
		return Config{}, err
	}
	return c, nil
}

func toCodes(names []string) ([]api.Code, error) {
	out := make([]api.Code, 0, len(names))
	for _, name := range names {
		if !slices.Contains(injectableCodes, api.Code(name)) {
			return nil, fmt.Errorf("%q is not one of %v", name, injectableCodes)
		}
		out = append(out, api.Code(name))
	}
	return out, nil
}
