package e2b

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/server/apierr"
	"github.com/different-ai/differently/server/sandboxes"
	"github.com/different-ai/differently/server/store"
)

// Every code of package api, and the errors without one, land on the status E2B's
// API documents for them.
func TestStatusOf(t *testing.T) {
	for _, tc := range []struct {
		name     string
		err      error
		status   int
		internal bool
	}{
		{"invalid", apierr.Invalid("bad timeout"), 400, false},
		{"unsupported capability", api.Errorf(api.CodeUnsupportedCapability, "no gpu"), 400, false},
		{"unsupported operation", api.Errorf(api.CodeUnsupportedOperation, "pause is not supported by pool devhost (adapter devhost)"), 400, false},
		{"payload too large", api.Errorf(api.CodePayloadTooLarge, "big"), 400, false},
		{"unauthenticated", api.Errorf(api.CodeUnauthenticated, "bad key"), 401, false},
		{"forbidden", api.Errorf(api.CodeForbidden, "not yours"), 403, false},
		{"not found", api.Errorf(api.CodeNotFound, "sandbox x not found"), 404, false},
		{"wrapped not found", fmt.Errorf("get: %w", api.Errorf(api.CodeNotFound, "gone")), 404, false},
		{"conflict", apierr.Conflict("sandbox is paused"), 409, false},
		{"idempotency", api.Errorf(api.CodeIdempotencyKeyReused, "reused"), 409, false},
		{"quota", api.Errorf(api.CodeQuotaExceeded, "too many"), 429, false},
		{"capacity", api.Errorf(api.CodeInsufficientCapacity, "full"), 503, false},
		{"failed", api.Errorf(api.CodeSandboxFailed, "broke"), 503, false},
		{"unavailable", api.Errorf(api.CodeProviderUnavailable, "later"), 503, false},
		{"retry after", sandboxes.RetryAfter(api.Errorf(api.CodeProviderUnavailable, "queue full"), 5), 503, false},
		{"database down", fmt.Errorf("list: %w", store.ErrUnavailable), 503, true},
		{"internal code", api.Errorf(api.CodeInternal, "host path /x"), 500, true},
		{"plain error", errors.New("boom at /var/lib"), 500, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, msg, internal := statusOf(tc.err)
			if status != tc.status || internal != tc.internal {
				t.Fatalf("statusOf(%v) = %d internal %v, want %d internal %v", tc.err, status, internal, tc.status, tc.internal)
			}
			if internal && msg != "internal error" && status == 500 {
				t.Fatalf("an internal error shows %q", msg)
			}
		})
	}
}

// The error body is E2B's {"code": status, "message"}, with Retry-After when the
// service gave one.
func TestWriteError(t *testing.T) {
	h := &handler{}
	h.log = discard()
	w := httptest.NewRecorder()
	h.writeError(w, httptest.NewRequest("GET", "/", nil), sandboxes.RetryAfter(api.Errorf(api.CodeProviderUnavailable, "queue full"), 5))
	if w.Code != 503 || w.Header().Get("Retry-After") != "5" || w.Body.String() != `{"code":503,"message":"queue full"}`+"\n" {
		t.Fatalf("answer %d %q Retry-After %q", w.Code, w.Body, w.Header().Get("Retry-After"))
	}
}

func TestListFilter(t *testing.T) {
	running := []store.State{store.StateQueued, store.StateProvisioning, store.StateRunning}
	paused := []store.State{store.StatePaused, store.StateStopped}
	for _, tc := range []struct {
		name  string
		query string // as on the wire
		want  store.SandboxFilter
		bad   bool
	}{
		{"none", "", store.SandboxFilter{Limit: 100, States: slices.Concat(running, paused)}, false},
		// The SDK encodes {"user": "a b", "k=1": "x&y"} as a query string and
		// sends that string as the metadata parameter, encoded again.
		{"metadata encoded twice", "metadata=" + url.QueryEscape(url.Values{"user": {"a b"}, "k=1": {"x&y"}}.Encode()),
			store.SandboxFilter{Limit: 100, States: slices.Concat(running, paused), Labels: map[string]string{"user": "a b", "k=1": "x&y"}}, false},
		{"states", "state=paused", store.SandboxFilter{Limit: 100, States: paused}, false},
		{"states comma", "state=running%2Cpaused", store.SandboxFilter{Limit: 100, States: slices.Concat(running, paused)}, false},
		{"paging", "limit=2&nextToken=abc", store.SandboxFilter{Limit: 2, Cursor: "abc", States: slices.Concat(running, paused)}, false},
		{"unknown state", "state=stopped", store.SandboxFilter{}, true},
		{"limit zero", "limit=0", store.SandboxFilter{}, true},
		{"limit over", "limit=101", store.SandboxFilter{}, true},
		{"repeated key", "metadata=" + url.QueryEscape("a=1&a=2"), store.SandboxFilter{}, true},
		{"template", "template=base", store.SandboxFilter{Limit: 100, States: slices.Concat(running, paused)}, false},
		{"started after", "startedAfter=2026-11-01T12:00:00.5Z", store.SandboxFilter{Limit: 100, States: slices.Concat(running, paused)}, false},
		{"started after, not a time", "startedAfter=yesterday", store.SandboxFilter{}, true},
		{"order asc", "order=asc", store.SandboxFilter{Limit: 100, States: slices.Concat(running, paused)}, false},
		{"order desc", "order=desc", store.SandboxFilter{}, true},
		{"order unknown", "order=random", store.SandboxFilter{}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q, err := url.ParseQuery(tc.query)
			if err != nil {
				t.Fatal(err)
			}
			lq, err := listFilter(q)
			f := lq.filter
			if tc.bad {
				if status, _, _ := statusOf(err); status != http.StatusBadRequest {
					t.Fatalf("listFilter(%q) = %v, want a 400", tc.query, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(f, tc.want) {
				t.Fatalf("listFilter(%q) = %+v, want %+v", tc.query, f, tc.want)
			}
		})
	}
}

func TestListKeep(t *testing.T) {
	t0 := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	sb := store.Sandbox{Profile: "python", CreatedAt: t0}
	for _, tc := range []struct {
		name string
		q    listQuery
		want bool
	}{
		{"no filter", listQuery{}, true},
		{"its template", listQuery{template: "python"}, true},
		{"another template", listQuery{template: "base"}, false},
		{"started at the time", listQuery{startedAfter: t0}, true},
		{"started before", listQuery{startedAfter: t0.Add(time.Nanosecond)}, false},
		{"both", listQuery{template: "python", startedAfter: t0.Add(-time.Hour)}, true},
	} {
		if got := tc.q.keep(sb); got != tc.want {
			t.Errorf("%s: keep = %v, want %v", tc.name, got, tc.want)
		}
	}
	if !(listQuery{template: "base"}).keep(store.Sandbox{}) {
		t.Error("a sandbox without a profile is not of template base")
	}
}

func TestAccessToken(t *testing.T) {
	secret := []byte("0123456789abcdef0123456789abcdef")
	tok := AccessToken(secret, "sb1")
	if !VerifyAccessToken(secret, "sb1", tok) {
		t.Fatal("a sandbox's own token does not verify")
	}
	for _, tc := range []struct {
		secret    []byte
		id, token string
	}{
		{secret, "sb2", tok},
		{[]byte("another secret of thirty-two by."), "sb1", tok},
		{secret, "sb1", ""},
		{nil, "sb1", AccessToken(nil, "sb1")},
		{secret, "", AccessToken(secret, "")},
	} {
		if VerifyAccessToken(tc.secret, tc.id, tc.token) {
			t.Errorf("VerifyAccessToken(%q, %q, %q) is true", tc.secret, tc.id, tc.token)
		}
	}
}

func TestExtends(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	in := func(d time.Duration) *time.Time { t := now.Add(d); return &t }
	for _, tc := range []struct {
		sb   store.Sandbox
		ttl  int64
		want bool
	}{
		{store.Sandbox{TTLSeconds: 60, ExpiresAt: in(time.Minute)}, 300, true},
		{store.Sandbox{TTLSeconds: 3600, ExpiresAt: in(time.Hour)}, 300, false},
		{store.Sandbox{}, 300, false}, // no expiry: nothing to extend
		{store.Sandbox{TTLSeconds: 60}, 300, true},
		{store.Sandbox{TTLSeconds: 60, ExpiresAt: in(time.Minute)}, 0, true},
	} {
		if got := extends(tc.sb, tc.ttl, now); got != tc.want {
			t.Errorf("extends(%+v, %d) = %v, want %v", tc.sb, tc.ttl, got, tc.want)
		}
	}
}

func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }
