package fake

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"slices"
	"time"

	"github.com/different-ai/differently/adapters"
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
	var c Config
	// Sorted keys make the reported error deterministic when several are wrong.
	keys := make([]string, 0, len(cfg))
	for k := range cfg {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, key := range keys {
		v := cfg[key]
		var err error
		switch key {
		case "totalCPU":
			c.TotalCPU, err = toFloat(v)
		case "totalMemoryMiB":
			c.TotalMemoryMiB, err = toInt(v)
		case "createLatencyMs":
			var ms int64
			ms, err = toInt(v)
			if err == nil && ms > math.MaxInt64/int64(time.Millisecond) {
				err = fmt.Errorf("%d ms is too long", ms)
			}
			c.CreateLatency = time.Duration(ms) * time.Millisecond
		case "createErrors":
			c.CreateErrors, err = toCodes(v)
		case "dropCreateResponses":
			var n int64
			n, err = toInt(v)
			if err == nil && n > math.MaxInt32 {
				err = fmt.Errorf("%d is too large", n)
			}
			c.DropCreateResponses = int(n)
		case "listError":
			c.ListError, err = toBool(v)
		case "healthError":
			c.HealthError, err = toBool(v)
		case "features":
			c.Features, err = toStrings(v)
			if err == nil {
				if verr := adapters.ValidateDeclaredFeatures(c.Features); verr != nil {
					return Config{}, keyError(key, verr)
				}
			}
		case "templates":
			c.Templates, err = toStrings(v)
		case "regions":
			c.Regions, err = toStrings(v)
		case "maxCPU":
			c.MaxCPU, err = toFloat(v)
		case "maxMemoryMiB":
			c.MaxMemoryMiB, err = toInt(v)
		case "maxDiskGiB":
			c.MaxDiskGiB, err = toInt(v)
		case "region":
			s, ok := v.(string)
			if !ok {
				err = fmt.Errorf("want a string, got %s", typeName(v))
			}
			c.Region = s
		default:
			return Config{}, api.Errorf(api.CodeInvalidRequest, "fake config: unknown key %q", key).WithDetail("key", key)
		}
		if err != nil {
			return Config{}, keyError(key, err)
		}
	}
	return c, nil
}

// keyError names the offending key in the message and in details, so the admin API
// can point the operator at it. Details of an *api.Error cause are kept.
func keyError(key string, err error) *api.Error {
	out := api.Errorf(api.CodeInvalidRequest, "fake config key %q: %s", key, err)
	if e := api.AsError(err); e != nil {
		out.Message = fmt.Sprintf("fake config key %q: %s", key, e.Message)
		for k, v := range e.Details {
			out = out.WithDetail(k, v)
		}
	}
	return out.WithDetail("key", key)
}

func typeName(v any) string {
	if v == nil {
		return "null"
	}
	return reflect.TypeOf(v).String()
}

// toFloat accepts every numeric form YAML and JSON decoders produce.
func toFloat(v any) (float64, error) {
	var f float64
	switch n := v.(type) {
	case float64:
		f = n
	case float32:
		f = float64(n)
	case json.Number:
		var err error
		if f, err = n.Float64(); err != nil {
			return 0, fmt.Errorf("%q is not a number", n.String())
		}
	default:
		i, err := toInt(v)
		if err != nil {
			return 0, fmt.Errorf("want a number, got %s", typeName(v))
		}
		return float64(i), nil
	}
	switch {
	case math.IsNaN(f) || math.IsInf(f, 0):
		return 0, fmt.Errorf("%v is not a finite number", f)
	case f < 0:
		return 0, fmt.Errorf("%v is negative", f)
	}
	return f, nil
}

// toInt accepts integers of any Go type and floats or json.Numbers with no
// fractional part, because a JSON decoder into any yields float64 for 3.
func toInt(v any) (int64, error) {
	var i int64
	switch n := v.(type) {
	case int:
		i = int64(n)
	case int8:
		i = int64(n)
	case int16:
		i = int64(n)
	case int32:
		i = int64(n)
	case int64:
		i = n
	case uint:
		if uint64(n) > math.MaxInt64 {
			return 0, fmt.Errorf("%d is too large", n)
		}
		i = int64(n)
	case uint8:
		i = int64(n)
	case uint16:
		i = int64(n)
	case uint32:
		i = int64(n)
	case uint64:
		if n > math.MaxInt64 {
			return 0, fmt.Errorf("%d is too large", n)
		}
		i = int64(n)
	case float32:
		return floatToInt(float64(n))
	case float64:
		return floatToInt(n)
	case json.Number:
		if x, err := n.Int64(); err == nil {
			i = x
			break
		}
		f, err := n.Float64()
		if err != nil {
			return 0, fmt.Errorf("%q is not a number", n.String())
		}
		return floatToInt(f)
	default:
		return 0, fmt.Errorf("want an integer, got %s", typeName(v))
	}
	if i < 0 {
		return 0, fmt.Errorf("%d is negative", i)
	}
	return i, nil
}

func floatToInt(f float64) (int64, error) {
	switch {
	case math.IsNaN(f) || math.IsInf(f, 0) || f != math.Trunc(f):
		return 0, fmt.Errorf("%v is not an integer", f)
	case f < 0:
		return 0, fmt.Errorf("%v is negative", f)
	case f >= math.MaxInt64: // float64(MaxInt64) rounds up to 2^63
		return 0, fmt.Errorf("%v is too large", f)
	}
	return int64(f), nil
}

func toBool(v any) (bool, error) {
	b, ok := v.(bool)
	if !ok {
		return false, fmt.Errorf("want true or false, got %s", typeName(v))
	}
	return b, nil
}

// toStrings accepts []string (Go callers) and []any of strings (decoders). The
// result is non-nil even when empty, so an explicit [] stays distinct from unset.
func toStrings(v any) ([]string, error) {
	switch list := v.(type) {
	case []string:
		return append([]string{}, list...), nil
	case []any:
		out := make([]string, 0, len(list))
		for i, item := range list {
			s, ok := item.(string)
			if !ok {
				return nil, fmt.Errorf("item %d: want a string, got %s", i, typeName(item))
			}
			out = append(out, s)
		}
		return out, nil
	}
	return nil, fmt.Errorf("want a list of strings, got %s", typeName(v))
}

func toCodes(v any) ([]api.Code, error) {
	names, err := toStrings(v)
	if err != nil {
		return nil, err
	}
	out := make([]api.Code, 0, len(names))
	for _, name := range names {
		if !slices.Contains(injectableCodes, api.Code(name)) {
			return nil, fmt.Errorf("%q is not one of %v", name, injectableCodes)
		}
		out = append(out, api.Code(name))
	}
	return out, nil
}
