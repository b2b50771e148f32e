package httpapi_test

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/adapters/fake"
	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/server/httpapi"
	"github.com/different-ai/differently/server/store"
)

func TestAuth(t *testing.T) {
	forEachStore(t, func(t *testing.T, st store.Store) {
		e := newEnv(t, st)
		e.do("", "GET", "/v1/sandboxes", nil).want(t, http.StatusUnauthorized, api.CodeUnauthenticated)
		e.do("dly_wrong", "GET", "/v1/sandboxes", nil).want(t, http.StatusUnauthorized, api.CodeUnauthenticated)
		e.request("", "GET", "/v1/sandboxes", nil, http.Header{"Authorization": {"Basic " + e.admin}}).
			want(t, http.StatusUnauthorized, api.CodeUnauthenticated)
		for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
			e.do("", "GET", path, nil).want(t, http.StatusOK)
		}

		a, b := e.projectToken("acme", "a"), e.projectToken("acme", "b")
		e.do(a, "GET", "/v1/admin/pools", nil).want(t, http.StatusForbidden, api.CodeForbidden)
		e.do(e.admin, "GET", "/v1/admin/pools", nil).want(t, http.StatusOK)

		sb := e.createSandbox(a, "fake", nil)
		if sb.Org != "acme" || sb.Project != "a" {
			t.Fatalf("created in %s/%s", sb.Org, sb.Project)
		}
		e.do(a, "GET", "/v1/sandboxes/"+sb.Id, nil).want(t, http.StatusOK)
		e.do(e.admin, "GET", "/v1/sandboxes/"+sb.Id, nil).want(t, http.StatusOK)

		// Project b gets exactly what a missing sandbox gets, with the ID swapped.
		missing := "sbx_01jzzzzzzzzzzzzzzzzzzzzzzz"
		other := e.do(b, "GET", "/v1/sandboxes/"+sb.Id, nil).want(t, http.StatusNotFound, api.CodeNotFound)
		none := e.do(b, "GET", "/v1/sandboxes/"+missing, nil).want(t, http.StatusNotFound, api.CodeNotFound)
		if got, want := string(other.body), strings.ReplaceAll(string(none.body), missing, sb.Id); got != want {
			t.Fatalf("another project's sandbox: %s\nmissing sandbox: %s", got, want)
		}
		for _, op := range []struct {
			method, path string
			body         any
		}{
			{"DELETE", "", nil}, {"PATCH", "", "{}"}, {"POST", "/exec", map[string]any{"command": "true"}},
			{"POST", "/stop", nil}, {"GET", "/snapshots", nil}, {"POST", "/fork", nil},
			{"GET", "/files?path=x", nil},
		} {
			e.do(b, op.method, "/v1/sandboxes/"+sb.Id+op.path, op.body).want(t, http.StatusNotFound, api.CodeNotFound)
		}
		var list httpapi.SandboxList
		e.do(b, "GET", "/v1/sandboxes", nil).want(t, http.StatusOK).decode(t, &list)
		if len(list.Items) != 0 {
			t.Fatalf("project b lists %d sandboxes", len(list.Items))
		}
		e.do(b, "GET", "/v1/sandboxes?project=a", nil).want(t, http.StatusOK).decode(t, &list)
		if len(list.Items) != 0 {
			t.Fatalf("project b lists project a: %d sandboxes", len(list.Items))
		}
		// An admin names a project as org/project, or by its name in any organisation.
		for q, want := range map[string]int{"?project=acme/a": 1, "?project=a": 1, "?project=other/a": 0, "?project=acme/b": 0} {
			e.do(e.admin, "GET", "/v1/sandboxes"+q, nil).want(t, http.StatusOK).decode(t, &list)
			if len(list.Items) != want || want == 1 && list.Items[0].Id != sb.Id {
				t.Fatalf("the admin lists %s: %+v, want %d", q, list.Items, want)
			}
		}
		// A project token cannot create elsewhere.
		e.do(b, "POST", "/v1/sandboxes", map[string]any{"project": "a"}).want(t, http.StatusForbidden, api.CodeForbidden)
	})
}

func TestCreateValidation(t *testing.T) {
	forEachStore(t, func(t *testing.T, st store.Store) {
		e := newEnv(t, st)
		big := `{"labels":{"a":"` + strings.Repeat("x", api.MaxJSONBodyBytes) + `"}}`
		for _, tc := range []struct {
			name   string
			body   any
			status int
			code   api.Code
		}{
			{"unknown capability", map[string]any{"capabilities": []string{"teleport"}}, 400, api.CodeInvalidRequest},
			{"isolation.none", map[string]any{"capabilities": []string{"isolation.none"}}, 400, api.CodeInvalidRequest},
			{"reserved label", map[string]any{"labels": map[string]string{"differently.dev/x": "1"}}, 400, api.CodeInvalidRequest},
			{"gpu", map[string]any{"capabilities": []string{"gpu"}}, 422, api.CodeUnsupportedCapability},
			{"negative resources", map[string]any{"resources": map[string]any{"cpu": -1}}, 400, api.CodeInvalidRequest},
			{"negative ttl", map[string]any{"ttlSeconds": -1}, 400, api.CodeInvalidRequest},
			{"bad env", map[string]any{"env": map[string]string{"A=B": "x"}}, 400, api.CodeInvalidRequest},
			{"profile", map[string]any{"profile": "big"}, 400, api.CodeInvalidRequest},
			{"unknown field", map[string]any{"colour": "blue"}, 400, api.CodeInvalidRequest},
			{"not json", "{", 400, api.CodeInvalidRequest},
			{"over 4 MiB", big, 413, api.CodePayloadTooLarge},
			{"unknown pool", map[string]any{"placement": map[string]any{"allowedPools": []string{"nope"}}}, 400, api.CodeInvalidRequest},
			{"missing snapshot", map[string]any{"fromSnapshot": "snap_nope"}, 404, api.CodeNotFound},
		} {
			t.Run(tc.name, func(t *testing.T) {
				e.t = t
				e.do(e.admin, "POST", "/v1/sandboxes", tc.body).want(t, tc.status, tc.code)
			})
		}
		e.t = t
		// A chunked body over the limit is cut off while reading.
		e.request(e.admin, "POST", "/v1/sandboxes", struct{ *strings.Reader }{strings.NewReader(big)}, nil).
			want(t, http.StatusRequestEntityTooLarge, api.CodePayloadTooLarge)
		if n := e.waker.n.Load(); n != 0 {
			t.Fatalf("refused creates woke the scheduler %d times", n)
		}
	})
}

func TestCreateIdempotencyKey(t *testing.T) {
	forEachStore(t, func(t *testing.T, st store.Store) {
		e := newEnv(t, st)
		body := []byte(`{"template":"base","labels":{"team":"x"},"env":{"SECRET":"v"},"ttlSeconds":60}`)
		hdr := http.Header{"Idempotency-Key": {"key-1"}}
		var first, second httpapi.Sandbox
		e.request(e.admin, "POST", "/v1/sandboxes", bytes.NewReader(body), hdr).want(t, http.StatusAccepted).decode(t, &first)
		e.request(e.admin, "POST", "/v1/sandboxes", bytes.NewReader(body), hdr).want(t, http.StatusOK).decode(t, &second)
		if first.Id != second.Id || first.State != httpapi.Queued {
			t.Fatalf("first %s (%s), second %s", first.Id, first.State, second.Id)
		}
		if first.Org != "default" || first.Project != "default" || *first.TtlSeconds != 60 || first.Labels["team"] != "x" {
			t.Fatalf("sandbox %+v", first)
		}
		raw := e.do(e.admin, "GET", "/v1/sandboxes/"+first.Id, nil).want(t, http.StatusOK).body
		if bytes.Contains(raw, []byte("SECRET")) || bytes.Contains(raw, []byte(`"env"`)) {
			t.Fatalf("env leaked: %s", raw)
		}
		if n := e.waker.n.Load(); n != 1 {
			t.Fatalf("scheduler woken %d times, want 1", n)
		}
		e.request(e.admin, "POST", "/v1/sandboxes", bytes.NewReader(body), http.Header{"Idempotency-Key": {strings.Repeat("k", 256)}}).
			want(t, http.StatusBadRequest, api.CodeInvalidRequest)
	})
}

// TestCreateIdempotencyKeyOtherRequest: a key used again with a different request
// is refused with 422 idempotency_key_reused, naming the first request's sandbox and
// creating nothing; the same request, however it is spaced and its keys ordered, is
// still a retry that gets the first sandbox.
func TestCreateIdempotencyKeyOtherRequest(t *testing.T) {
	forEachStore(t, func(t *testing.T, st store.Store) {
		e := newEnv(t, st)
		hdr := http.Header{"Idempotency-Key": {"deploy-7"}}
		create := func(body string) response {
			return e.request(e.admin, "POST", "/v1/sandboxes", strings.NewReader(body), hdr)
		}
		var first, again httpapi.Sandbox
		create(`{"template":"base","labels":{"a":"1","b":"2"},"ttlSeconds":60}`).want(t, http.StatusAccepted).decode(t, &first)
		create(`{ "ttlSeconds": 60, "labels": {"b":"2", "a":"1"}, "template": "base" }`).want(t, http.StatusOK).decode(t, &again)
		if again.Id != first.Id {
			t.Fatalf("the same request made %s, want %s", again.Id, first.Id)
		}
		for _, other := range []string{
			`{"template":"base","labels":{"a":"1","b":"2"},"ttlSeconds":61}`,
			`{"template":"base","labels":{"a":"1"},"ttlSeconds":60}`,
			`{"template":"other","labels":{"a":"1","b":"2"},"ttlSeconds":60}`,
			`{"template":"base","labels":{"a":"1","b":"2"},"ttlSeconds":60,"env":{"K":"v"}}`,
		} {
			ae := create(other).want(t, http.StatusUnprocessableEntity, api.CodeIdempotencyKeyReused).apiError(t)
			if !strings.Contains(ae.Message, "deploy-7") || !strings.Contains(ae.Message, first.Id) {
				t.Fatalf("message %q names neither the key nor the first sandbox", ae.Message)
			}
		}
		var list httpapi.SandboxList
		e.do(e.admin, "GET", "/v1/sandboxes", nil).want(t, http.StatusOK).decode(t, &list)
		if len(list.Items) != 1 {
			t.Fatalf("%d sandboxes after refused creates, want 1", len(list.Items))
		}
		if n := e.waker.n.Load(); n != 1 {
			t.Fatalf("scheduler woken %d times, want 1", n)
		}
	})
}

func TestListFiltersAndPaging(t *testing.T) {
	forEachStore(t, func(t *testing.T, st store.Store) {
		e := newEnv(t, st)
		var ids []string
		for i := range 5 {
			labels := map[string]any{"labels": map[string]string{"n": string(rune('a' + i)), "even": map[bool]string{true: "yes", false: "no"}[i%2 == 0]}}
			ids = append(ids, e.createSandbox(e.admin, "fake", labels).Id)
		}
		e.provision(ids[0])
		e.provision(ids[1])
		list := func(query string) []string {
			t.Helper()
			var l httpapi.SandboxList
			e.do(e.admin, "GET", "/v1/sandboxes"+query, nil).want(t, http.StatusOK).decode(t, &l)
			var out []string
			for _, sb := range l.Items {
				out = append(out, sb.Id)
			}
			return out
		}
		if got := list("?state=running"); len(got) != 2 {
			t.Fatalf("running: %v", got)
		}
		if got := list("?state=running,queued"); len(got) != 5 {
			t.Fatalf("running,queued: %v", got)
		}
		if got := list("?state=queued&state=running&label=even=yes"); len(got) != 3 {
			t.Fatalf("even: %v", got)
		}
		if got := list("?label=even=yes&label=n=c"); len(got) != 1 || got[0] != ids[2] {
			t.Fatalf("n=c: %v", got)
		}
		if got := list("?pool=fake"); len(got) != 2 {
			t.Fatalf("pool=fake: %v", got)
		}
		var all []string
		cursor := ""
		for pages := 0; ; pages++ {
			var l httpapi.SandboxList
			e.do(e.admin, "GET", "/v1/sandboxes?limit=2&cursor="+cursor, nil).want(t, http.StatusOK).decode(t, &l)
			for _, sb := range l.Items {
				all = append(all, sb.Id)
			}
			if l.NextCursor == nil {
				break
			}
			cursor = *l.NextCursor
			if pages > 5 {
				t.Fatal("paging does not end")
			}
		}
		if strings.Join(all, ",") != strings.Join(ids, ",") {
			t.Fatalf("paged %v, want %v", all, ids)
		}
		for _, q := range []string{"?state=sleeping", "?label=novalue", "?limit=0", "?limit=1001", "?limit=x", "?cursor=%21%21"} {
			e.do(e.admin, "GET", "/v1/sandboxes"+q, nil).want(t, http.StatusBadRequest, api.CodeInvalidRequest)
		}
	})
}

func TestPatchAndDelete(t *testing.T) {
	forEachStore(t, func(t *testing.T, st store.Store) {
		e := newEnv(t, st)
		queued := e.createSandbox(e.admin, "fake", nil)
		run := e.running(e.admin, "fake")

		var got httpapi.Sandbox
		e.do(e.admin, "PATCH", "/v1/sandboxes/"+run.ID, map[string]any{"labels": map[string]string{"a": "1"}, "ttlSeconds": 120}).
			want(t, http.StatusOK).decode(t, &got)
		want := e.clk.Now().Add(120e9)
		if got.Labels["a"] != "1" || got.ExpiresAt == nil || !got.ExpiresAt.Equal(want) {
			t.Fatalf("patched %+v, want expiry %v", got, want)
		}
		got = httpapi.Sandbox{}
		e.do(e.admin, "PATCH", "/v1/sandboxes/"+run.ID, map[string]any{"ttlSeconds": 0}).want(t, http.StatusOK).decode(t, &got)
		if got.ExpiresAt != nil || got.TtlSeconds == nil || *got.TtlSeconds != 0 || got.Labels["a"] != "1" {
			t.Fatalf("ttl 0: %+v", got)
		}
		e.do(e.admin, "PATCH", "/v1/sandboxes/"+queued.Id, map[string]any{"ttlSeconds": 30}).want(t, http.StatusOK).decode(t, &got)
		if got.ExpiresAt != nil || *got.TtlSeconds != 30 {
			t.Fatalf("queued ttl: %+v", got)
		}
		e.do(e.admin, "PATCH", "/v1/sandboxes/"+run.ID, map[string]any{"labels": map[string]string{"differently.dev/org": "x"}}).
			want(t, http.StatusBadRequest, api.CodeInvalidRequest)

		before := e.waker.n.Load()
		for range 2 {
			e.do(e.admin, "DELETE", "/v1/sandboxes/"+run.ID, nil).want(t, http.StatusAccepted).decode(t, &got)
			if got.State != httpapi.Terminating {
				t.Fatalf("deleted: %s", got.State)
			}
		}
		if n := e.waker.n.Load() - before; n != 1 {
			t.Fatalf("deletes woke the scheduler %d times, want 1", n)
		}
		e.do(e.admin, "PATCH", "/v1/sandboxes/"+run.ID, map[string]any{"ttlSeconds": 5}).want(t, http.StatusConflict, api.CodeInvalidState)
		// A terminated sandbox deletes idempotently too.
		if _, err := st.UpdateSandbox(context.Background(), run.ID, e.clk.Now(), func(sb *store.Sandbox) error {
			sb.State = store.StateTerminated
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		e.do(e.admin, "DELETE", "/v1/sandboxes/"+run.ID, nil).want(t, http.StatusAccepted).decode(t, &got)
		if got.State != httpapi.Terminated {
			t.Fatalf("deleted terminated: %s", got.State)
		}
		e.do(e.admin, "DELETE", "/v1/sandboxes/sbx_nope", nil).want(t, http.StatusNotFound, api.CodeNotFound)
	})
}

func TestCost(t *testing.T) {
	forEachStore(t, func(t *testing.T, st store.Store) {
		e := newEnv(t, st)
		sb := e.createSandbox(e.admin, "devhost", map[string]any{"resources": map[string]any{"cpu": 2, "memoryMiB": 2048}})
		e.provision(sb.Id)
		e.clk.Advance(3 * 3600e9)
		var got httpapi.Sandbox
		e.do(e.admin, "GET", "/v1/sandboxes/"+sb.Id, nil).want(t, http.StatusOK).decode(t, &got)
		// 3 h × (2 cpu × 1 + 2 GiB × 0.5)
		if got.Cost == nil || *got.Cost != 9 {
			t.Fatalf("cost %v, want 9", got.Cost)
		}
	})
}

// renewingFake is a fake whose backend keeps its own expiry, as OpenSandbox does.
type renewingFake struct {
	*fake.Adapter
	mu    sync.Mutex
	calls []int64
	fail  bool
}

func (r *renewingFake) RenewTTL(_ context.Context, ref string, ttl int64) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fail {
		return adapters.Unavailable("backend refused the new expiry")
	}
	r.calls = append(r.calls, ttl)
	return nil
}

// TestPatchTTLReachesTheBackend: an extended TTL moves the backend's own expiry
// first; when the backend refuses, the sandbox keeps its old TTL.
func TestPatchTTLReachesTheBackend(t *testing.T) {
	forEachStore(t, func(t *testing.T, st store.Store) {
		e := newEnv(t, st)
		rf := &renewingFake{Adapter: fake.New(fake.Config{})}
		e.addPool("renewing", rf)
		sb := e.running(e.admin, "renewing")
		var got httpapi.Sandbox
		e.do(e.admin, "PATCH", "/v1/sandboxes/"+sb.ID, map[string]any{"ttlSeconds": 3600}).want(t, http.StatusOK).decode(t, &got)
		if rf.calls == nil || rf.calls[0] != 3600 || got.TtlSeconds == nil || *got.TtlSeconds != 3600 {
			t.Fatalf("renew calls %v, sandbox ttl %v", rf.calls, got.TtlSeconds)
		}
		rf.mu.Lock()
		rf.fail = true
		rf.mu.Unlock()
		e.do(e.admin, "PATCH", "/v1/sandboxes/"+sb.ID, map[string]any{"ttlSeconds": 60}).want(t, http.StatusServiceUnavailable, api.CodeProviderUnavailable)
		e.do(e.admin, "GET", "/v1/sandboxes/"+sb.ID, nil).want(t, http.StatusOK).decode(t, &got)
		if *got.TtlSeconds != 3600 {
			t.Fatalf("a refused renewal still changed the TTL to %d", *got.TtlSeconds)
		}
	})
}

// TestDefaultTTL: nothing lives forever unless its create says ttlSeconds 0.
func TestDefaultTTL(t *testing.T) {
	forEachStore(t, func(t *testing.T, st store.Store) {
		e := newEnv(t, st)
		ttlOf := func(extra map[string]any) int64 {
			t.Helper()
			sb := e.createSandbox(e.admin, "fake", extra)
			if sb.TtlSeconds == nil {
				return 0
			}
			return *sb.TtlSeconds
		}
		if got := ttlOf(nil); got != httpapi.DefaultTTLSeconds {
			t.Errorf("no ttlSeconds: %d, want the built-in default %d", got, httpapi.DefaultTTLSeconds)
		}
		if got := ttlOf(map[string]any{"ttlSeconds": 0}); got != 0 {
			t.Errorf("explicit 0: %d, want no expiry", got)
		}
		e.do(e.admin, "PUT", "/v1/admin/policy", map[string]any{"defaults": map[string]any{"ttlSeconds": 600}}).want(t, http.StatusOK)
		if got := ttlOf(nil); got != 600 {
			t.Errorf("policy default: %d, want 600", got)
		}
		if got := ttlOf(map[string]any{"ttlSeconds": 30}); got != 30 {
			t.Errorf("explicit 30: %d", got)
		}
		for _, bad := range []any{-1, 1.5, "1h"} {
			e.do(e.admin, "PUT", "/v1/admin/policy", map[string]any{"defaults": map[string]any{"ttlSeconds": bad}}).
				want(t, http.StatusBadRequest, api.CodeInvalidRequest)
		}
	})
}
