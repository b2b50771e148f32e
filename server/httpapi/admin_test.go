package httpapi_test

import (
	"context"
	"errors"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/different-ai/differently/adapters/fake"
	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/server/httpapi"
	"github.com/different-ai/differently/server/pools"
	"github.com/different-ai/differently/server/store"
	"github.com/different-ai/differently/server/store/sqlite"
)

func TestAdminPools(t *testing.T) {
	forEachStore(t, func(t *testing.T, st store.Store) {
		e := newEnv(t, st)
		var list httpapi.PoolList
		e.do(e.admin, "GET", "/v1/admin/pools", nil).want(t, http.StatusOK).decode(t, &list)
		if len(list.Items) != 3 || list.Items[0].Name != "devhost" || !*list.Items[0].Healthy ||
			!strings.Contains(strings.Join(*list.Items[0].EffectiveFeatures, ","), "exec.stream") || list.Items[0].Info == nil {
			t.Fatalf("pools %+v", list.Items)
		}

		for _, tc := range []struct {
			name string
			body any
			code api.Code
		}{
			{"bad name", map[string]any{"name": "Bad_Name", "adapter": "fake"}, api.CodeInvalidRequest},
			{"unknown kind", map[string]any{"name": "x", "adapter": "firecracker"}, api.CodeInvalidRequest},
			{"dev only", map[string]any{"name": "x", "adapter": "devhost", "config": map[string]any{"root": t.TempDir()}}, api.CodeInvalidRequest},
			{"bad trust", map[string]any{"name": "x", "adapter": "fake", "trust": "maybe"}, api.CodeInvalidRequest},
			{"bad feature", map[string]any{"name": "x", "adapter": "fake", "features": []string{"warp"}}, api.CodeInvalidRequest},
			{"negative", map[string]any{"name": "x", "adapter": "fake", "maxConcurrency": -1}, api.CodeInvalidRequest},
			{"unknown field", map[string]any{"name": "x", "adapter": "fake", "size": 3}, api.CodeInvalidRequest},
			{"bad credentials env", map[string]any{"name": "x", "adapter": "fake", "credentials": map[string]any{"env": "1TOKEN"}}, api.CodeInvalidRequest},
			// The daemon's own variables are never a pool's credential: the pool's
			// endpoint would receive the database URL.
			{"daemon's own credentials env", map[string]any{"name": "x", "adapter": "fake", "credentials": map[string]any{"env": "DIFFERENTLY_DATABASE_URL"}}, api.CodeInvalidRequest},
		} {
			t.Run(tc.name, func(t *testing.T) {
				e.t = t
				e.do(e.admin, "POST", "/v1/admin/pools", tc.body).want(t, http.StatusBadRequest, tc.code)
			})
		}
		e.t = t
		if msg := e.do(e.admin, "POST", "/v1/admin/pools", map[string]any{"name": "x", "adapter": "firecracker"}).apiError(t).Message; !strings.Contains(msg, "devhost, fake") {
			t.Fatalf("unknown kind message %q does not name the known kinds", msg)
		}

		var p httpapi.Pool
		e.do(e.admin, "POST", "/v1/admin/pools", map[string]any{"name": "extra", "adapter": "fake", "maxConcurrency": 2,
			"costModel": map[string]any{"cpuHour": 0.1}}).want(t, http.StatusCreated).decode(t, &p)
		if p.Trust != "private" || !*p.Healthy || p.MaxConcurrency != 2 || *p.CostModel.CpuHour != 0.1 || *p.Sandboxes != 0 {
			t.Fatalf("created %+v", p)
		}
		e.do(e.admin, "POST", "/v1/admin/pools", map[string]any{"name": "extra", "adapter": "fake"}).want(t, http.StatusConflict, api.CodeInvalidState)

		e.do(e.admin, "PATCH", "/v1/admin/pools/extra", map[string]any{"region": "eu", "maxStarting": 1}).want(t, http.StatusOK).decode(t, &p)
		if *p.Region != "eu" || p.MaxStarting != 1 || p.MaxConcurrency != 2 {
			t.Fatalf("patched %+v", p)
		}
		e.do(e.admin, "PUT", "/v1/admin/pools/extra", map[string]any{"name": "extra", "adapter": "fake", "trust": "external"}).
			want(t, http.StatusOK).decode(t, &p)
		if p.Trust != "external" || p.Region != nil || p.MaxConcurrency != 0 {
			t.Fatalf("put %+v", p)
		}
		e.do(e.admin, "PUT", "/v1/admin/pools/extra", map[string]any{"name": "extra", "adapter": "devhost"}).want(t, http.StatusBadRequest, api.CodeInvalidRequest)
		e.do(e.admin, "PUT", "/v1/admin/pools/extra", map[string]any{"name": "other", "adapter": "fake"}).want(t, http.StatusBadRequest, api.CodeInvalidRequest)
		e.do(e.admin, "PATCH", "/v1/admin/pools/nope", map[string]any{}).want(t, http.StatusNotFound, api.CodeNotFound)
		e.do(e.admin, "GET", "/v1/admin/pools/extra", nil).want(t, http.StatusOK)
		e.do(e.admin, "GET", "/v1/admin/pools/nope", nil).want(t, http.StatusNotFound, api.CodeNotFound)

		// A stored pool the pool manager has not built yet.
		if _, err := st.CreatePool(context.Background(), e.clk.Now(), store.Pool{Name: "later", Adapter: "fake", Trust: api.TrustPrivate}); err != nil {
			t.Fatal(err)
		}
		e.do(e.admin, "GET", "/v1/admin/pools/later", nil).want(t, http.StatusOK).decode(t, &p)
		if *p.Healthy || *p.LastError != "not probed yet" {
			t.Fatalf("unprobed %+v", p)
		}

		// Delete with sandboxes: refused, then forced, then done once they are gone.
		sb := e.running(e.admin, "fake")
		queued := e.createSandbox(e.admin, "fake", nil)
		if _, err := st.UpdateSandbox(context.Background(), queued.Id, e.clk.Now(), func(s *store.Sandbox) error {
			s.Pool = "fake"
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		e.do(e.admin, "DELETE", "/v1/admin/pools/fake", nil).want(t, http.StatusConflict, api.CodeInvalidState)
		before := e.waker.n.Load()
		got := e.do(e.admin, "DELETE", "/v1/admin/pools/fake?force=true", nil).want(t, http.StatusConflict, api.CodeInvalidState).apiError(t)
		if got.Details["terminating"] != float64(2) || e.waker.n.Load() == before {
			t.Fatalf("forced delete %+v", got)
		}
		for _, id := range []string{sb.ID, queued.Id} {
			cur, _ := st.GetSandbox(context.Background(), id)
			if cur.State != store.StateTerminating {
				t.Fatalf("%s is %s", id, cur.State)
			}
			// What the scheduler's terminator would do.
			if _, err := st.UpdateSandbox(context.Background(), id, e.clk.Now(), func(s *store.Sandbox) error {
				s.State = store.StateTerminated
				return nil
			}); err != nil {
				t.Fatal(err)
			}
		}
		// Every sandbox has ended, but the backend still holds the running one's
		// instance (the simulated terminator above did not delete it): once the pool
		// is gone nothing would, so only a forced delete goes on, and deletes it.
		v, _ := e.pools.View("fake")
		if insts, _ := v.Adapter.List(context.Background(), e.inst); len(insts) != 1 {
			t.Fatalf("instances before the delete: %+v", insts)
		}
		left := e.do(e.admin, "DELETE", "/v1/admin/pools/fake", nil).want(t, http.StatusConflict, api.CodeInvalidState).apiError(t)
		if left.Details["instances"] != float64(1) {
			t.Fatalf("delete with an instance left: %+v", left)
		}
		e.do(e.admin, "DELETE", "/v1/admin/pools/fake?force=true", nil).want(t, http.StatusNoContent)
		if insts, _ := v.Adapter.List(context.Background(), e.inst); len(insts) != 0 {
			t.Fatalf("instances after the forced delete: %+v", insts)
		}
		e.do(e.admin, "GET", "/v1/admin/pools/fake", nil).want(t, http.StatusNotFound, api.CodeNotFound)
		e.do(e.admin, "DELETE", "/v1/admin/pools/extra", nil).want(t, http.StatusNoContent)
		e.do(e.admin, "DELETE", "/v1/admin/pools/extra", nil).want(t, http.StatusNotFound, api.CodeNotFound)
	})
}

func TestPolicyAndTrust(t *testing.T) {
	forEachStore(t, func(t *testing.T, st store.Store) {
		e := newEnv(t, st)
		e.do(e.admin, "POST", "/v1/admin/pools", map[string]any{"name": "hosted", "adapter": "fake", "trust": "external"}).want(t, http.StatusCreated)
		// The external pool is the only one with region "far": not allowed yet.
		e.do(e.admin, "PATCH", "/v1/admin/pools/hosted", map[string]any{"region": "far"}).want(t, http.StatusOK)
		e.do(e.admin, "POST", "/v1/sandboxes", map[string]any{"placement": map[string]any{"regions": []string{"far"}}}).
			want(t, http.StatusBadRequest, api.CodeInvalidRequest)

		var pol httpapi.Policy
		e.do(e.admin, "GET", "/v1/admin/policy", nil).want(t, http.StatusOK).decode(t, &pol)
		if *pol.AllowExternal || len(*pol.ExternalPools) != 0 {
			t.Fatalf("default policy %+v", pol)
		}
		e.do(e.admin, "PUT", "/v1/admin/policy", map[string]any{"externalPools": []string{"Not A Pool"}}).want(t, http.StatusBadRequest, api.CodeInvalidRequest)
		e.do(e.admin, "PUT", "/v1/admin/policy", map[string]any{"allowExternal": true, "externalPools": []string{"hosted", "future"}}).
			want(t, http.StatusOK).decode(t, &pol)
		if !*pol.AllowExternal || strings.Join(*pol.ExternalPools, ",") != "hosted,future" {
			t.Fatalf("put policy %+v", pol)
		}
		e.do(e.admin, "POST", "/v1/sandboxes", map[string]any{"placement": map[string]any{"regions": []string{"far"}}}).want(t, http.StatusAccepted)

		var rep httpapi.TrustReport
		e.do(e.admin, "GET", "/v1/admin/trust", nil).want(t, http.StatusOK).decode(t, &rep)
		if !rep.AllowExternal || len(rep.Pools) != 4 {
			t.Fatalf("trust %+v", rep)
		}
		for _, p := range rep.Pools {
			if !p.ReceivesWork {
				t.Fatalf("%s receives no work", p.Name)
			}
			if p.Name == "hosted" && (p.Trust != "external" || *p.AdapterClaim != "private" || p.Note == nil) {
				t.Fatalf("hosted %+v", p)
			}
			if p.Name == "devhost" && !strings.Contains(*p.Isolation, "none") {
				t.Fatalf("devhost %+v", p)
			}
		}
		e.do(e.admin, "PUT", "/v1/admin/policy", map[string]any{"allowExternal": false}).want(t, http.StatusOK)
		e.do(e.admin, "GET", "/v1/admin/trust", nil).want(t, http.StatusOK).decode(t, &rep)
		for _, p := range rep.Pools {
			if p.ReceivesWork != (p.Name != "hosted") {
				t.Fatalf("%s receivesWork %v", p.Name, p.ReceivesWork)
			}
		}
	})
}

func TestTokens(t *testing.T) {
	forEachStore(t, func(t *testing.T, st store.Store) {
		e := newEnv(t, st)
		var created httpapi.TokenCreated
		e.do(e.admin, "POST", "/v1/admin/tokens", map[string]any{"scope": "project", "project": "web", "name": "ci"}).
			want(t, http.StatusCreated).decode(t, &created)
		if !strings.HasPrefix(created.Secret, "dly_") || *created.Token.Org != "default" || *created.Token.Project != "web" {
			t.Fatalf("created %+v", created)
		}
		sb := e.createSandbox(created.Secret, "fake", nil)
		if sb.Project != "web" {
			t.Fatalf("project token created in %s", sb.Project)
		}
		e.do(created.Secret, "GET", "/v1/admin/tokens", nil).want(t, http.StatusForbidden, api.CodeForbidden)

		list := e.do(e.admin, "GET", "/v1/admin/tokens", nil).want(t, http.StatusOK)
		if strings.Contains(string(list.body), created.Secret) || strings.Contains(string(list.body), "hash") {
			t.Fatalf("token list leaks a secret: %s", list.body)
		}
		var tl httpapi.TokenList
		list.decode(t, &tl)
		if len(tl.Items) != 2 {
			t.Fatalf("tokens %+v", tl.Items)
		}
		for _, tok := range tl.Items {
			if tok.LastUsedAt == nil {
				t.Fatalf("token %s was used but has no lastUsedAt", tok.Id)
			}
		}

		for _, body := range []map[string]any{
			{"scope": "project"},
			{"scope": "admin", "project": "x"},
			{"scope": "root"},
		} {
			e.do(e.admin, "POST", "/v1/admin/tokens", body).want(t, http.StatusBadRequest, api.CodeInvalidRequest)
		}
		e.do(e.admin, "DELETE", "/v1/admin/tokens/"+created.Token.Id, nil).want(t, http.StatusNoContent)
		e.do(created.Secret, "GET", "/v1/sandboxes", nil).want(t, http.StatusUnauthorized, api.CodeUnauthenticated)
		e.do(e.admin, "DELETE", "/v1/admin/tokens/"+created.Token.Id, nil).want(t, http.StatusNotFound, api.CodeNotFound)
	})
}

// TestTokenExpiry: a token made with ttlSeconds is accepted until then and answers
// 401, as an unknown one does, from then on; it stays listed, with its expiry, until
// it is revoked. Out-of-range TTLs are refused.
func TestTokenExpiry(t *testing.T) {
	forEachStore(t, func(t *testing.T, st store.Store) {
		e := newEnv(t, st)
		var created httpapi.TokenCreated
		e.do(e.admin, "POST", "/v1/admin/tokens", map[string]any{"scope": "project", "project": "web", "ttlSeconds": 600}).
			want(t, http.StatusCreated).decode(t, &created)
		want := e.clk.Now().Add(10 * time.Minute)
		if created.Token.ExpiresAt == nil || !created.Token.ExpiresAt.Equal(want) {
			t.Fatalf("expiresAt %v, want %v", created.Token.ExpiresAt, want)
		}
		e.do(created.Secret, "GET", "/v1/sandboxes", nil).want(t, http.StatusOK)
		e.clk.Advance(10*time.Minute - time.Second)
		e.do(created.Secret, "GET", "/v1/sandboxes", nil).want(t, http.StatusOK)
		e.clk.Advance(time.Second)
		e.do(created.Secret, "GET", "/v1/sandboxes", nil).want(t, http.StatusUnauthorized, api.CodeUnauthenticated)

		var tl httpapi.TokenList
		e.do(e.admin, "GET", "/v1/admin/tokens", nil).want(t, http.StatusOK).decode(t, &tl)
		found := false
		for _, tok := range tl.Items {
			if tok.Id == created.Token.Id {
				found = tok.ExpiresAt != nil && tok.ExpiresAt.Equal(want)
			} else if tok.ExpiresAt != nil {
				t.Fatalf("token %s made without a TTL expires at %v", tok.Id, tok.ExpiresAt)
			}
		}
		if !found {
			t.Fatalf("the expired token is not listed with its expiry: %+v", tl.Items)
		}
		for _, ttl := range []int64{-1, api.MaxTTLSeconds + 1} {
			e.do(e.admin, "POST", "/v1/admin/tokens", map[string]any{"scope": "project", "project": "web", "ttlSeconds": ttl}).
				want(t, http.StatusBadRequest, api.CodeInvalidRequest)
		}
	})
}

func TestOperations(t *testing.T) {
	forEachStore(t, func(t *testing.T, st store.Store) {
		e := newEnv(t, st)
		var s httpapi.Status
		e.do("", "GET", "/healthz", nil).want(t, http.StatusOK).decode(t, &s)
		if s.Status != "ok" {
			t.Fatalf("healthz %+v", s)
		}
		e.do("", "GET", "/readyz", nil).want(t, http.StatusOK).decode(t, &s)
		if s.Status != "ready" {
			t.Fatalf("readyz %+v", s)
		}
		e.do(e.admin, "GET", "/v1/sandboxes/sbx_nope", nil).want(t, http.StatusNotFound)
		e.do("", "GET", "/v1/sandboxes/sbx_nope", nil).want(t, http.StatusUnauthorized)
		e.do(e.admin, "GET", "/v1/nowhere", nil).want(t, http.StatusNotFound, api.CodeNotFound)
		e.do(e.admin, "PUT", "/v1/sandboxes", nil).want(t, http.StatusMethodNotAllowed, api.CodeInvalidRequest)
		// Methods HTTP does not define, unauthenticated: one label for all of them.
		for _, method := range []string{"BREW", "M0000001", "M0000002"} {
			e.do("", method, "/v1/sandboxes", nil).want(t, http.StatusUnauthorized)
		}
		m := e.do("", "GET", "/metrics", nil).want(t, http.StatusOK)
		for _, method := range []string{"BREW", "M0000001", "M0000002"} {
			if strings.Contains(string(m.body), `method="`+method+`"`) {
				t.Fatalf("metrics label a request by its method %s:\n%s", method, m.body)
			}
		}
		for _, want := range []string{
			`differently_http_requests_total{method="GET",route="/v1/sandboxes/{id}",status="404"} 1`,
			`differently_http_requests_total{method="GET",route="/healthz",status="200"} 1`,
			`differently_http_requests_total{method="GET",route="/v1/sandboxes/{id}",status="401"} 1`,
			`differently_http_requests_total{method="other",route="unmatched",status="401"} 3`,
			`differently_http_request_duration_seconds_bucket`,
		} {
			if !strings.Contains(string(m.body), want) {
				t.Fatalf("metrics lack %s:\n%s", want, m.body)
			}
		}

		var rep httpapi.ReconcileReport
		e.do(e.admin, "POST", "/v1/admin/reconcile", nil).want(t, http.StatusOK).decode(t, &rep)
		if len(rep.Pools) != 1 || rep.Pools[0].Pool != "fake" || (*rep.Pools[0].Lost)[0] != "sbx_x" {
			t.Fatalf("report %+v", rep)
		}
		// Without a reconciler the route says so.
		h, err := httpapi.New(httpapi.Options{Store: st, Pools: e.pools, Changes: feed(t, st)})
		if err != nil {
			t.Fatal(err)
		}
		rec := newRecorder()
		req, _ := http.NewRequest("POST", "/v1/admin/reconcile", nil)
		req.Header.Set("Authorization", "Bearer "+e.admin)
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusServiceUnavailable {
			t.Fatalf("reconcile without a reconciler: %d %s", rec.Code, rec.Body)
		}
		// A bad parameter gets the envelope.
		e.do(e.admin, "DELETE", "/v1/admin/pools/devhost?force=maybe", nil).want(t, http.StatusBadRequest, api.CodeInvalidRequest)
	})
}

func TestPanicsAndAdapterErrors(t *testing.T) {
	forEachStore(t, func(t *testing.T, st store.Store) {
		e := newEnv(t, st)
		e.addPool("panicky", fake.New(fake.Config{ExecFunc: func(_ context.Context, _ fake.InstanceView, req api.ExecRequest) (api.ExecResult, error) {
			switch req.Command {
			case "panic":
				panic("adapter bug")
			case "full":
				return api.ExecResult{}, api.Errorf(api.CodeInsufficientCapacity, "no room")
			}
			return api.ExecResult{}, errors.New("/secret/host/path exploded")
		}}))
		sb := e.running(e.admin, "panicky")
		exec := "/v1/sandboxes/" + sb.ID + "/exec"
		got := e.do(e.admin, "POST", exec, api.ExecRequest{Command: "panic"}).want(t, http.StatusInternalServerError, api.CodeInternal).apiError(t)
		if got.Message != "internal error" {
			t.Fatalf("panic answer %+v", got)
		}
		e.do(e.admin, "POST", exec+"?stream=1", api.ExecRequest{Command: "panic"}).want(t, http.StatusInternalServerError, api.CodeInternal)
		// Capacity is the scheduler's business: clients see provider_unavailable.
		e.do(e.admin, "POST", exec, api.ExecRequest{Command: "full"}).want(t, http.StatusServiceUnavailable, api.CodeProviderUnavailable)
		// An error without a code reveals nothing.
		r := e.do(e.admin, "POST", exec, api.ExecRequest{Command: "other"}).want(t, http.StatusInternalServerError, api.CodeInternal)
		if strings.Contains(string(r.body), "secret") {
			t.Fatalf("internal error leaked: %s", r.body)
		}
		e.do("", "GET", "/healthz", nil).want(t, http.StatusOK)
		// A pool whose adapter is gone answers 503 for operations.
		e.pools.Update("panicky", func(v *pools.View) { v.Adapter, v.LastError = nil, "credentials missing" })
		msg := e.do(e.admin, "POST", exec, api.ExecRequest{Command: "x"}).want(t, http.StatusServiceUnavailable, api.CodeProviderUnavailable).apiError(t).Message
		if !strings.Contains(msg, "credentials missing") {
			t.Fatalf("no-adapter message %q", msg)
		}
	})
}

// pingRecorder is a store whose database does not answer pings; it records the
// deadline each ping was given.
type pingRecorder struct {
	store.Store
	deadlines chan time.Duration
}

func (p pingRecorder) Ping(ctx context.Context) error {
	dl, ok := ctx.Deadline()
	if !ok {
		p.deadlines <- -1
	} else {
		p.deadlines <- time.Until(dl)
	}
	return errors.New("the database did not answer")
}

// /readyz bounds its ping of the database, so that a database that accepts
// connections and never answers makes the replica unready instead of hanging the
// probe.
func TestReadyzPingIsBounded(t *testing.T) {
	sq, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "db.sqlite"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sq.Close() })
	st := pingRecorder{Store: sq, deadlines: make(chan time.Duration, 1)}
	e := newEnv(t, st)
	e.do("", "GET", "/readyz", nil).want(t, http.StatusServiceUnavailable, api.CodeProviderUnavailable)
	if d := <-st.deadlines; d <= 0 || d > 2*time.Second {
		t.Errorf("the ping's deadline was %v away, want at most 2s", d)
	}
}
