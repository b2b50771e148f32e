package store

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/internal/textcut"
)

// Timestamp is how every driver normalises a time before storing it: UTC, truncated to
// the microsecond (PostgreSQL's timestamptz precision), without a monotonic reading. Values
// read back compare equal (==) to Timestamp of the value written, on either driver.
func Timestamp(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }

// TimestampPtr is Timestamp for optional times.
func TimestampPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	v := Timestamp(*t)
	return &v
}

// EncodeCursor makes the opaque cursor that resumes a listing after id.
func EncodeCursor(id string) string {
	return base64.RawURLEncoding.EncodeToString([]byte("id:" + id))
}

// Page cuts a listing read with limit+1 rows down to limit and returns the cursor of
// the next page, or "" when the extra row shows there is none.
func Page(items []Sandbox, limit int) ([]Sandbox, string) {
	return PageBy(items, limit, func(sb Sandbox) string { return sb.ID })
}

// PageBy is Page for a listing of anything ordered by the ID id returns.
func PageBy[T any](items []T, limit int, id func(T) string) ([]T, string) {
	if len(items) <= limit {
		return items, ""
	}
	items = items[:limit]
	return items, EncodeCursor(id(items[limit-1]))
}

// DecodeCursor reverses EncodeCursor; "" decodes to "". Anything else is invalid_request.
func DecodeCursor(c string) (string, error) {
	if c == "" {
		return "", nil
	}
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil || !strings.HasPrefix(string(b), "id:") || len(b) == 3 {
		return "", api.Errorf(api.CodeInvalidRequest, "invalid cursor %q", c)
	}
	return string(b[3:]), nil
}

// PageStart reads the limit and cursor of a listing ordered by ID: the rows to
// return (PageLimit) and the ID to start after (DecodeCursor).
func PageStart(limit int, cursor string) (int, string, error) {
	limit, err := PageLimit(limit)
	if err != nil {
		return 0, "", err
	}
	after, err := DecodeCursor(cursor)
	return limit, after, err
}

// PageLimit applies DefaultLimit and MaxLimit; a negative limit is invalid_request.
func PageLimit(limit int) (int, error) {
	switch {
	case limit < 0:
		return 0, api.Errorf(api.CodeInvalidRequest, "limit must not be negative")
	case limit == 0:
		return DefaultLimit, nil
	case limit > MaxLimit:
		return MaxLimit, nil
	}
	return limit, nil
}

// MarshalJSON encodes a column value. It exists so that both drivers encode alike.
func MarshalJSON(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("store: encode json: %w", err)
	}
	return b, nil
}

// UnmarshalJSON decodes a column value written by MarshalJSON; empty means null.
func UnmarshalJSON(b []byte, v any) error {
	if len(b) == 0 || decodeEmpty(b, v) {
		return nil
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("store: decode json: %w", err)
	}
	return nil
}

// decodeEmpty decodes the empty values most JSON columns hold (null, {} and [])
// into the columns' types as encoding/json would, and reports whether it did. A
// reconcile pass reads four such columns of every live sandbox, and the reflective
// decode of each was a tenth of the pass.
func decodeEmpty(b []byte, v any) bool {
	switch t := v.(type) {
	case *map[string]string:
		switch string(b) {
		case "null":
			*t = nil
			return true
		case "{}":
			// An object adds its keys to a map already there: none.
			if *t == nil {
				*t = map[string]string{}
			}
			return true
		}
	case *[]string:
		switch string(b) {
		case "null":
			*t = nil
			return true
		case "[]":
			*t = []string{}
			return true
		}
	case *Placement:
		// null leaves a struct alone, and so does an object without fields.
		switch string(b) {
		case "null", "{}":
			return true
		}
	}
	return false
}

// NormalizeSandbox prepares a sandbox for CreateSandbox: it stamps the times from now,
// fills the defaults and checks what the schema cannot.
func NormalizeSandbox(now time.Time, sb Sandbox) (Sandbox, error) {
	if sb.ID == "" {
		return sb, api.Errorf(api.CodeInvalidRequest, "sandbox id is required")
	}
	if sb.State == "" {
		sb.State = StateQueued
	}
	if !sb.State.Valid() {
		return sb, api.Errorf(api.CodeInvalidRequest, "unknown sandbox state %q", sb.State)
	}
	now = Timestamp(now)
	sb.CreatedAt, sb.UpdatedAt, sb.StateChangedAt = now, now, now
	if sb.NextAttemptAt.IsZero() {
		sb.NextAttemptAt = now
	}
	sb.Version = 1
	sb.Reason = storableText(sb.Reason)
	// Without spare capacity, an admit callback that records an event on one copy
	// of sb (a driver may admit more than once) cannot write into the array that
	// the other copies share.
	sb.Pending = slices.Clip(sb.Pending)
	return NormalizeSandboxTimes(sb), nil
}

// MaxReasonBytes bounds a sandbox's reason as stored.
const MaxReasonBytes = 2 << 10

// storableText makes text that may come from a backend (a sandbox's reason quotes
// adapters' errors and instance messages) fit for either store: PostgreSQL's text
// refuses NUL and invalid UTF-8, and a write refused for a backend's words would
// leave the sandbox's outcome unrecorded. Both become U+FFFD. It is also cut to
// MaxReasonBytes: a plugin's error may run to megabytes, which every read of the
// sandbox, and every answer about it, would carry.
func storableText(s string) string {
	if strings.IndexByte(s, 0) >= 0 || !utf8.ValidString(s) {
		s = strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
	}
	if len(s) > MaxReasonBytes {
		s = textcut.Prefix(s, MaxReasonBytes-len("…")) + "…"
	}
	return s
}

// NormalizeSandboxTimes applies Timestamp to every time of sb.
func NormalizeSandboxTimes(sb Sandbox) Sandbox {
	sb.ExpiresAt = TimestampPtr(sb.ExpiresAt)
	sb.ClaimExpiresAt = TimestampPtr(sb.ClaimExpiresAt)
	sb.AvoidUntil = TimestampPtr(sb.AvoidUntil)
	sb.NextAttemptAt = Timestamp(sb.NextAttemptAt)
	sb.CreatedAt = Timestamp(sb.CreatedAt)
	sb.UpdatedAt = Timestamp(sb.UpdatedAt)
	sb.StateChangedAt = Timestamp(sb.StateChangedAt)
	return sb
}

// ApplyUpdate runs an UpdateSandbox callback on a copy of cur and returns the row to
// write: fn's changes, with the fields fn may not change restored and the bookkeeping
// (Version, UpdatedAt, StateChangedAt) applied. Both drivers call it inside their
// locked transaction.
func ApplyUpdate(cur Sandbox, now time.Time, fn func(*Sandbox) error) (Sandbox, error) {
	next := cur
	// Deep-copy the reference fields so that fn cannot alias the caller's value.
	next.Capabilities = append([]string(nil), cur.Capabilities...)
	next.Labels = copyMap(cur.Labels)
	next.Env = copyMap(cur.Env)
	if err := fn(&next); err != nil {
		return cur, err
	}
	if !next.State.Valid() {
		return cur, api.Errorf(api.CodeInvalidRequest, "unknown sandbox state %q", next.State)
	}
	now = Timestamp(now)
	next.ID, next.CreatedAt, next.RequestHash = cur.ID, cur.CreatedAt, cur.RequestHash
	next.InitCommands = cur.InitCommands
	next.Version = cur.Version + 1
	next.UpdatedAt = now
	next.StateChangedAt = cur.StateChangedAt
	if next.State != cur.State {
		next.StateChangedAt = now
	}
	next.Reason = storableText(next.Reason)
	return NormalizeSandboxTimes(next), nil
}

// clone returns a copy of the stored row sb that shares nothing with it, so that
// the holder of sb may change it without changing the copy. A stored row has no
// events pending; the copy is left none either.
func (sb Sandbox) clone() Sandbox {
	out := sb
	out.Capabilities = slices.Clone(sb.Capabilities)
	out.Labels = copyMap(sb.Labels)
	out.Env = copyMap(sb.Env)
	out.InitCommands = slices.Clone(sb.InitCommands)
	out.Placement.AllowedPools = slices.Clone(sb.Placement.AllowedPools)
	out.Placement.Regions = slices.Clone(sb.Placement.Regions)
	out.ExpiresAt = clonePtr(sb.ExpiresAt)
	out.ClaimExpiresAt = clonePtr(sb.ClaimExpiresAt)
	out.AvoidUntil = clonePtr(sb.AvoidUntil)
	out.Pending = nil
	return out
}

func clonePtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

func copyMap(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// ValidatePool checks what the schema cannot.
func ValidatePool(p Pool) error {
	if p.Name == "" {
		return api.Errorf(api.CodeInvalidRequest, "pool name is required")
	}
	if p.Adapter == "" {
		return api.Errorf(api.CodeInvalidRequest, "pool %q: adapter is required", p.Name)
	}
	if !p.Source.Valid() {
		return api.Errorf(api.CodeInvalidRequest, "pool %q: source must be %q or %q, got %q",
			p.Name, PoolFromConfig, PoolFromAPI, p.Source)
	}
	return ValidateWarm(p.Name, p.Warm)
}

// NewPool prepares a pool for CreatePool: validated, stamped with now at Version 1,
// and without a source taken as the API's.
func NewPool(now time.Time, p Pool) (Pool, error) {
	if p.Source == "" {
		p.Source = PoolFromAPI
	}
	if err := ValidatePool(p); err != nil {
		return Pool{}, err
	}
	p.CreatedAt, p.UpdatedAt, p.Version = Timestamp(now), Timestamp(now), 1
	return p, nil
}

// ValidateToken checks what the schema cannot.
func ValidateToken(t Token) error {
	switch {
	case t.ID == "":
		return api.Errorf(api.CodeInvalidRequest, "token id is required")
	case len(t.Hash) == 0:
		return api.Errorf(api.CodeInvalidRequest, "token hash is required")
	case t.Scope != ScopeAdmin && t.Scope != ScopeProject:
		return api.Errorf(api.CodeInvalidRequest, "token scope must be %q or %q", ScopeAdmin, ScopeProject)
	case t.Scope == ScopeProject && t.Project == "":
		return api.Errorf(api.CodeInvalidRequest, "a project token needs a project")
	}
	return nil
}

// KeyedByState converts counts keyed by a state column's text; nil stays nil.
func KeyedByState(byName map[string]int) map[State]int {
	if byName == nil {
		return nil
	}
	out := make(map[State]int, len(byName))
	for st, n := range byName {
		out[State(st)] = n
	}
	return out
}
