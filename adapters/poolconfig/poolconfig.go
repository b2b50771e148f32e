// Package poolconfig reads an adapter's pool config: the map an operator writes under
// a pool's config key, decoded from YAML or JSON (so numbers arrive as int, float64 or
// json.Number). Every problem names the key, and keys nobody asked for are errors, so a
// typo never silently falls back to a default.
package poolconfig

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/url"
	"reflect"
	"slices"
	"strings"

	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/internal/safeurl"
)

// Reader hands out typed values of one config and remembers what went wrong.
type Reader struct {
	adapter string
	cfg     map[string]any
	read    map[string]bool
	errs    map[string]error
}

// Read starts reading cfg for the named adapter kind (used in messages).
func Read(adapter string, cfg map[string]any) *Reader {
	return &Reader{adapter: adapter, cfg: cfg, read: map[string]bool{}, errs: map[string]error{}}
}

// Has reports whether the key is set (and marks it known).
func (r *Reader) Has(key string) bool {
	r.read[key] = true
	_, ok := r.cfg[key]
	return ok
}

func get[T any](r *Reader, key string, def T, conv func(any) (T, error)) T {
	r.read[key] = true
	v, ok := r.cfg[key]
	if !ok {
		return def
	}
	out, err := conv(v)
	if err != nil {
		r.errs[key] = err
		return def
	}
	return out
}

// String returns a string value, or def when unset.
func (r *Reader) String(key, def string) string { return get(r, key, def, ToString) }

// OneOf returns a string that must be one of allowed, or def when unset.
func (r *Reader) OneOf(key, def string, allowed ...string) string {
	return get(r, key, def, func(v any) (string, error) {
		s, err := ToString(v)
		if err == nil && !slices.Contains(allowed, s) {
			err = fmt.Errorf("%q is not one of %s", s, strings.Join(allowed, ", "))
		}
		return s, err
	})
}

// Bool returns a boolean value, or def when unset.
func (r *Reader) Bool(key string, def bool) bool { return get(r, key, def, ToBool) }

// Int returns a non-negative integer, or def when unset.
func (r *Reader) Int(key string, def int64) int64 { return get(r, key, def, ToInt) }

// Float returns a non-negative finite number, or def when unset.
func (r *Reader) Float(key string, def float64) float64 { return get(r, key, def, ToFloat) }

// URL returns an endpoint URL, or def when unset. A value that is set must be an
// absolute http or https URL with a host and neither credentials, query nor fragment:
// anything else can never be called, and a pool stored with it would only fail at its
// first probe. An empty or blank value is refused too; leave the key out for def.
func (r *Reader) URL(key, def string) string { return get(r, key, def, ToURL) }

// URLOrDefault is URL for a key that has a default, where an empty or blank value
// means unset and gives def: pool configs written before URL refused empty values
// used "" to ask for the default, and still must load. A required URL has no
// default to fall back on; read it with URL.
func (r *Reader) URLOrDefault(key, def string) string {
	return get(r, key, def, func(v any) (string, error) {
		if s, ok := v.(string); ok && strings.TrimSpace(s) == "" {
			return def, nil
		}
		return ToURL(v)
	})
}

// Strings returns a list of strings, or nil when unset (an explicit [] is non-nil).
func (r *Reader) Strings(key string) []string { return get(r, key, nil, ToStrings) }

// Check adds a problem with a value the caller read and found wrong.
func (r *Reader) Check(key string, err error) {
	if err != nil {
		r.errs[key] = err
	}
}

// Err reports the first problem: a key no accessor asked for (a typo is usually why
// another key looks missing, so these come first), then a value of the wrong type or
// a failed Check, in key order. Nil when the config is good.
func (r *Reader) Err() error {
	keys := make([]string, 0, len(r.cfg)+len(r.errs))
	for k := range r.cfg {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if !r.read[k] {
			return api.Errorf(api.CodeInvalidRequest, "%s config: unknown key %q", r.adapter, k).WithDetail("key", k)
		}
	}
	keys = keys[:0]
	for k := range r.errs {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		return KeyError(r.adapter, k, r.errs[k])
	}
	return nil
}

// KeyError names the offending key in the message and in details, so the admin API
// can point the operator at it. Details of an *api.Error cause are kept.
func KeyError(adapter, key string, err error) *api.Error {
	out := api.Errorf(api.CodeInvalidRequest, "%s config key %q: %s", adapter, key, err)
	if e := api.AsError(err); e != nil {
		out.Message = fmt.Sprintf("%s config key %q: %s", adapter, key, e.Message)
		for k, v := range e.Details {
			out = out.WithDetail(k, v)
		}
	}
	return out.WithDetail("key", key)
}

// ToURL accepts a string holding an absolute http or https URL with a host, without
// user information, query or fragment. The URL is quoted only through safeurl, since
// a refused one may hold a password.
func ToURL(v any) (string, error) {
	s, err := ToString(v)
	if err != nil {
		return "", err
	}
	if strings.TrimSpace(s) == "" {
		return "", errors.New("must be an http or https URL, got an empty string")
	}
	u, err := url.Parse(strings.TrimSpace(s))
	switch {
	case err != nil:
		return "", fmt.Errorf("%q is not a URL: %w", safeurl.Describe(s), safeurl.Reason(err))
	case u.Scheme != "http" && u.Scheme != "https":
		return "", fmt.Errorf("%q must be an http or https URL", safeurl.Describe(s))
	case u.Host == "" || u.Hostname() == "":
		return "", fmt.Errorf("%q has no host", safeurl.Describe(s))
	case u.User != nil:
		return "", errors.New("must not hold credentials (the pool's credentials.env carries the key)")
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "":
		return "", fmt.Errorf("%q must not have a query or fragment", safeurl.Describe(s))
	}
	return strings.TrimSpace(s), nil
}

// ToString accepts a string.
func ToString(v any) (string, error) {
	s, ok := v.(string)
	if !ok {
		return "", fmt.Errorf("want a string, got %s", typeName(v))
	}
	return s, nil
}

func typeName(v any) string {
	if v == nil {
		return "null"
	}
	return reflect.TypeOf(v).String()
}

// ToFloat accepts every numeric form YAML and JSON decoders produce.
func ToFloat(v any) (float64, error) {
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
		i, err := ToInt(v)
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

// ToInt accepts integers of any Go type and floats or json.Numbers with no
// fractional part, because a JSON decoder into any yields float64 for 3.
func ToInt(v any) (int64, error) {
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

// ToBool accepts a YAML or JSON boolean.
func ToBool(v any) (bool, error) {
	b, ok := v.(bool)
	if !ok {
		return false, fmt.Errorf("want true or false, got %s", typeName(v))
	}
	return b, nil
}

// ToStrings accepts []string (Go callers) and []any of strings (decoders). The
// result is non-nil even when empty, so an explicit [] stays distinct from unset.
func ToStrings(v any) ([]string, error) {
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
