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

	// Faults drawn at random; see the package documentation. FaultSeed seeds the
	// draws, so one seed gives the same faults for the same sequence of calls.
	FaultSeed              uint64
	CreateLatencyJitter    time.Duration
	CreateErrorRate        float64
	CreateErrorCodes       []api.Code // nil: every code in InjectableCreateCodes
	DropCreateResponseRate float64
	DeleteErrorRate        float64
	DeleteErrorCodes       []api.Code // nil: every code in InjectableDeleteCodes
	ListErrorRate          float64
	ExecErrorRate          float64
	ExecErrorCodes         []api.Code // nil: every code in InjectableExecCodes
	ExecStreamDropRate     float64

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

// InjectableCreateCodes are the codes createErrors and createErrorCodes may name:
// the ones Create can legitimately return, so that injected faults exercise real
// scheduler paths.
func InjectableCreateCodes() []api.Code {
	return []api.Code{
		api.CodeInsufficientCapacity,
		api.CodeSandboxFailed,
		api.CodeProviderUnavailable,
		api.CodeInvalidRequest,
		api.CodeInternal,
	}
}

// InjectableDeleteCodes are the codes deleteErrorCodes may name: an outage, or an
// error the control plane cannot classify. Delete never answers not_found.
func InjectableDeleteCodes() []api.Code {
	return []api.Code{api.CodeProviderUnavailable, api.CodeInternal}
}

// InjectableExecCodes are the codes execErrorCodes may name: the ones Exec can
// legitimately return for a running instance, so that injected faults exercise real
// API paths. A command's own failure is an exit code, never an error.
func InjectableExecCodes() []api.Code {
	return []api.Code{
		api.CodeProviderUnavailable,
		api.CodeInsufficientCapacity,
		api.CodeInvalidState,
		api.CodeNotFound,
		api.CodeInternal,
	}
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
	c.CreateLatency = millis(r, "createLatencyMs")
	c.CreateLatencyJitter = millis(r, "createLatencyJitterMs")
	if c.CreateLatency > math.MaxInt64-c.CreateLatencyJitter {
		r.Check("createLatencyJitterMs", fmt.Errorf("createLatencyMs plus createLatencyJitterMs is too long"))
	}
	c.FaultSeed = uint64(r.Int("faultSeed", 0))
	c.CreateErrorRate = rate(r, "createErrorRate")
	c.DropCreateResponseRate = rate(r, "dropCreateResponseRate")
	c.DeleteErrorRate = rate(r, "deleteErrorRate")
	c.ListErrorRate = rate(r, "listErrorRate")
	c.ExecErrorRate = rate(r, "execErrorRate")
	c.ExecStreamDropRate = rate(r, "execStreamDropRate")
	c.CreateErrorCodes = codeList(r, "createErrorCodes", InjectableCreateCodes())
	c.DeleteErrorCodes = codeList(r, "deleteErrorCodes", InjectableDeleteCodes())
	c.ExecErrorCodes = codeList(r, "execErrorCodes", InjectableExecCodes())
	if n := r.Int("dropCreateResponses", 0); n > math.MaxInt32 {
		r.Check("dropCreateResponses", fmt.Errorf("%d is too large", n))
	} else {
		c.DropCreateResponses = int(n)
	}
	if r.Has("createErrors") {
		var err error
		c.CreateErrors, err = toCodes(r.Strings("createErrors"), InjectableCreateCodes())
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

// millis reads a duration in whole milliseconds.
func millis(r *poolconfig.Reader, key string) time.Duration {
	ms := r.Int(key, 0)
	if ms > math.MaxInt64/int64(time.Millisecond) {
		r.Check(key, fmt.Errorf("%d ms is too long", ms))
		return 0
	}
	return time.Duration(ms) * time.Millisecond
}

// rate reads a probability: a number from 0 to 1.
func rate(r *poolconfig.Reader, key string) float64 {
	p := r.Float(key, 0)
	if p > 1 {
		r.Check(key, fmt.Errorf("%v is not a probability: want a number from 0 to 1", p))
		return 0
	}
	return p
}

// codeList reads a non-empty list of codes out of allowed; nil when unset.
func codeList(r *poolconfig.Reader, key string, allowed []api.Code) []api.Code {
	if !r.Has(key) {
		return nil
	}
	names := r.Strings(key)
	if names == nil {
		return nil // not a list: Strings recorded the problem
	}
	if len(names) == 0 {
		r.Check(key, fmt.Errorf("name at least one code of %v, or leave the key out for all of them", allowed))
		return nil
	}
	codes, err := toCodes(names, allowed)
	r.Check(key, err)
	return codes
}

func toCodes(names []string, allowed []api.Code) ([]api.Code, error) {
	out := make([]api.Code, 0, len(names))
	for _, name := range names {
		if !slices.Contains(allowed, api.Code(name)) {
			return nil, fmt.Errorf("%q is not one of %v", name, allowed)
		}
		out = append(out, api.Code(name))
	}
	return out, nil
}
