package httpapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/different-ai/differently/adapters/fake"
	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/internal/ids"
	"github.com/different-ai/differently/server/changes"
	"github.com/different-ai/differently/server/httpapi"
	"github.com/different-ai/differently/server/scheduler"
	"github.com/different-ai/differently/server/store"
)

// newEnvScheduled is newEnv with a real scheduler running behind the API, woken by
// it and taking its direct work, until the test ends.
func newEnvScheduled(t *testing.T, st store.Store) *env {
	t.Helper()
	return newEnvScheduledWith(t, st, nil)
}

// newEnvScheduledWith is newEnvScheduled with a chance to change the API's options.
func newEnvScheduledWith(t *testing.T, st store.Store, change func(*httpapi.Options)) *env {
	t.Helper()
	return newEnvWith(t, st, func(o *httpapi.Options) {
		if change != nil {
			change(o)
		}
		sched, err := scheduler.New(o.Store, o.Pools.(*testPools), o.Clock, scheduler.Options{Installation: o.Installation})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		wg.Go(func() { sched.Run(ctx) })
		t.Cleanup(func() {
			cancel()
			wg.Wait()
		})
		o.Scheduler, o.Direct = sched, sched
	})
}

func prefer(v string) http.Header { return http.Header{"Prefer": {v}} }

// With a scheduler taking direct work and Prefer: wait, a create answers with the
// sandbox running and a delete with it terminated: one request each.
func TestPreferWaitDirect(t *testing.T) {
	forEachStore(t, func(t *testing.T, st store.Store) {
		e := newEnvScheduled(t, st)
		body := `{"placement":{"allowedPools":["fake"]}}`
		r := e.request(e.admin, "POST", "/v1/sandboxes", strings.NewReader(body), prefer("wait=30"))
		if r.status != http.StatusAccepted || r.header.Get("Preference-Applied") != "wait=30" {
			t.Fatalf("create = %d %v: %s", r.status, r.header, r.body)
		}
		var sb httpapi.Sandbox
		r.decode(t, &sb)
		if sb.State != httpapi.Running || sb.Pool == nil || *sb.Pool != "fake" {
			t.Fatalf("created %+v, want it running on fake", sb)
		}
		fk := e.pools.adapters["fake"].(*fake.Adapter)
		if fk.Instances() != 1 {
			t.Fatalf("instances = %d", fk.Instances())
		}
		// Exec works at once: the row the answer came from is committed.
		if r := e.do(e.admin, "POST", "/v1/sandboxes/"+sb.Id+"/exec", map[string]any{"command": "true"}); r.status != http.StatusOK {
			t.Fatalf("exec = %d: %s", r.status, r.body)
		}

		r = e.request(e.admin, "DELETE", "/v1/sandboxes/"+sb.Id, nil, prefer("respond-async, wait=30"))
		if r.status != http.StatusAccepted || r.header.Get("Preference-Applied") != "wait=30" {
			t.Fatalf("delete = %d %v: %s", r.status, r.header, r.body)
		}
		r.decode(t, &sb)
		if sb.State != httpapi.Terminated {
			t.Fatalf("deleted %+v, want it terminated", sb)
		}
		if fk.Instances() != 0 {
			t.Fatalf("instances after delete = %d", fk.Instances())
		}
		// Deleting again answers at once with the same sandbox.
		r = e.request(e.admin, "DELETE", "/v1/sandboxes/"+sb.Id, nil, prefer("wait=30"))
		r.decode(t, &sb)
		if r.status != http.StatusAccepted || sb.State != httpapi.Terminated {
			t.Fatalf("second delete = %d, %s", r.status, sb.State)
		}
	})
}

// A malformed wait is refused before anything is written; a Prefer header without
// wait changes nothing.
func TestPreferWaitInvalid(t *testing.T) {
	forEachStore(t, func(t *testing.T, st store.Store) {
		e := newEnv(t, st)
		body := `{"placement":{"allowedPools":["fake"]}}`
		for _, v := range []string{"wait=61", "wait=-1", "wait=abc", "wait=", "wait=+5", "wait=1.5"} {
			r := e.request(e.admin, "POST", "/v1/sandboxes", strings.NewReader(body), prefer(v))
			if r.status != http.StatusBadRequest || r.apiError(t).Code != api.CodeInvalidRequest {
				t.Fatalf("Prefer %q on create = %d: %s", v, r.status, r.body)
			}
		}
		var list httpapi.SandboxList
		e.do(e.admin, "GET", "/v1/sandboxes", nil).decode(t, &list)
		if len(list.Items) != 0 {
			t.Fatalf("refused creates stored %d sandboxes", len(list.Items))
		}
		r := e.request(e.admin, "POST", "/v1/sandboxes", strings.NewReader(body), prefer("return=minimal"))
		if r.status != http.StatusAccepted || r.header.Get("Preference-Applied") != "" {
			t.Fatalf("create with another preference = %d %v", r.status, r.header)
		}
		var sb httpapi.Sandbox
		r.decode(t, &sb)
		r = e.request(e.admin, "DELETE", "/v1/sandboxes/"+sb.Id, nil, prefer("wait=x"))
		if r.status != http.StatusBadRequest {
			t.Fatalf("Prefer wait=x on delete = %d: %s", r.status, r.body)
		}
		var got httpapi.Sandbox
		e.do(e.admin, "GET", "/v1/sandboxes/"+sb.Id, nil).decode(t, &got)
		if got.State != httpapi.Queued {
			t.Fatalf("a refused delete changed the sandbox: %s", got.State)
		}
	})
}

// Without a scheduler nothing runs: wait=0 answers at once with the sandbox as
// stored, and a queued sandbox, with nothing to delete, is terminated by its delete.
func TestPreferWaitNoScheduler(t *testing.T) {
	forEachStore(t, func(t *testing.T, st store.Store) {
		e := newEnv(t, st)
		r := e.request(e.admin, "POST", "/v1/sandboxes", strings.NewReader(`{"placement":{"allowedPools":["fake"]}}`), prefer("wait=0"))
		var sb httpapi.Sandbox
		r.decode(t, &sb)
		if r.status != http.StatusAccepted || sb.State != httpapi.Queued || r.header.Get("Preference-Applied") != "wait=0" {
			t.Fatalf("create = %d %v, %s", r.status, r.header, sb.State)
		}
		r = e.do(e.admin, "DELETE", "/v1/sandboxes/"+sb.Id, nil)
		r.decode(t, &sb)
		if r.status != http.StatusAccepted || sb.State != httpapi.Terminated {
			t.Fatalf("delete of a queued sandbox = %d, %s", r.status, sb.State)
		}
	})
}

// A create does not overtake a queued sandbox that is due: it is queued behind it.
// One waiting out a backoff holds nobody back.
func TestDirectYieldsToDueSandboxes(t *testing.T) {
	forEachStore(t, func(t *testing.T, st store.Store) {
		e := newEnvScheduled(t, st)
		ctx := context.Background()
		create := func() httpapi.Sandbox {
			var sb httpapi.Sandbox
			e.do(e.admin, "POST", "/v1/sandboxes", map[string]any{"placement": map[string]any{"allowedPools": []string{"fake"}}}).
				want(t, http.StatusAccepted).decode(t, &sb)
			return sb
		}
		// Due, but claimed by a replica that is placing it: this scheduler leaves it.
		lease := e.clk.Now().Add(time.Hour)
		waiting, _, err := st.CreateSandbox(ctx, e.clk.Now(), store.Sandbox{
			ID: ids.New("sbx"), Org: httpapi.DefaultOrg, Project: httpapi.DefaultProject,
			Placement: store.Placement{AllowedPools: []string{"fake"}},
			ClaimedBy: "replica-elsewhere", ClaimExpiresAt: &lease,
		})
		if err != nil {
			t.Fatal(err)
		}
		behind := create()
		if behind.State != httpapi.Queued {
			t.Fatalf("a create behind a due sandbox is %s, want queued", behind.State)
		}
		// The pass takes it in turn.
		var sb httpapi.Sandbox
		e.do(e.admin, "GET", "/v1/sandboxes/"+behind.Id+"/wait?state=running", nil).want(t, http.StatusOK).decode(t, &sb)
		if sb.State != httpapi.Running {
			t.Fatalf("queued sandbox ended %s", sb.State)
		}
		// The waiting sandbox backs off: queued, not due, and the next create starts at once.
		if _, err := st.UpdateSandbox(ctx, waiting.ID, e.clk.Now(), func(cur *store.Sandbox) error {
			cur.NextAttemptAt = e.clk.Now().Add(time.Minute)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if next := create(); next.State != httpapi.Provisioning {
			t.Fatalf("a create with only a backing-off sandbox queued is %s, want provisioning", next.State)
		}
	})
}

// A create that would start at once on an external pool reads the policy afresh: the
// replica's cached copy may still allow a pool that another replica's policy write
// has just forbidden, and that pool is another party's infrastructure. Here the
// change feed never tells the API of the write, as when it lags; the sandbox is
// queued for a pass, which reads the policy itself, instead of started on the pool.
func TestDirectCreateRereadsPolicyForExternalPools(t *testing.T) {
	forEachStore(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		e := newEnvScheduledWith(t, st, func(o *httpapi.Options) { o.Changes = changes.New() })
		if _, err := st.CreatePool(ctx, e.clk.Now(), store.Pool{Name: "ext", Adapter: "fake", Trust: api.TrustExternal}); err != nil {
			t.Fatal(err)
		}
		if err := e.pools.Refresh(ctx); err != nil {
			t.Fatal(err)
		}
		if err := st.PutPolicy(ctx, store.Policy{AllowExternal: true, ExternalPools: []string{"ext"}}); err != nil {
			t.Fatal(err)
		}
		// Allowed: it starts at once, and the API has cached the policy.
		sb := e.createSandbox(e.admin, "ext", nil)
		if sb.State != httpapi.Provisioning || sb.Pool == nil || *sb.Pool != "ext" {
			t.Fatalf("create while ext is allowed: %s on %v, want provisioning on ext", sb.State, sb.Pool)
		}
		if err := st.PutPolicy(ctx, store.Policy{}); err != nil {
			t.Fatal(err)
		}
		sb = e.createSandbox(e.admin, "ext", nil)
		if sb.State != httpapi.Queued || (sb.Pool != nil && *sb.Pool != "") {
			t.Fatalf("create after ext was forbidden: %s on %v, want queued on no pool", sb.State, sb.Pool)
		}
		if n := e.pools.adapters["ext"].(*fake.Adapter).Instances(); n > 1 {
			t.Fatalf("ext runs %d instances, want at most the first sandbox's", n)
		}
	})
}

// hookStore calls before as the create's transaction begins, then records whether
// the transaction's context has ended.
// It keeps the sandbox as the API's admission left it for the insert.
type hookStore struct {
	store.Store
	before   func()
	cut      bool
	inserted store.Sandbox
}

func (h *hookStore) CreateSandboxAdmitted(ctx context.Context, now time.Time, sb store.Sandbox, admit func(store.Admission, *store.Sandbox) error) (store.Sandbox, bool, error) {
	h.before()
	h.cut = ctx.Err() != nil
	return h.Store.CreateSandboxAdmitted(ctx, now, sb, func(a store.Admission, ins *store.Sandbox) error {
		err := admit(a, ins)
		h.inserted = *ins
		return err
	})
}

// A direct create's claim runs from its transaction, not from before it: time it
// waited to be stored does not come out of its Create's time, which ends a margin
// (10 s) before the claim.
func TestDirectCreateClaimsFromTheInsert(t *testing.T) {
	forEachStore(t, func(t *testing.T, st store.Store) {
		var e *env
		hs := &hookStore{Store: st, before: func() { e.clk.Advance(20 * time.Second) }}
		e = newEnvScheduledWith(t, st, func(o *httpapi.Options) { o.Store = hs })
		e.createSandbox(e.admin, "fake", nil)
		in := hs.inserted
		want := e.clk.Now().Add(scheduler.DefaultProvisionTimeout + 10*time.Second)
		if in.State != store.StateProvisioning || in.ClaimExpiresAt == nil || !in.ClaimExpiresAt.Equal(want) {
			t.Fatalf("inserted %s, claimed until %v; want provisioning, claimed until %v", in.State, in.ClaimExpiresAt, want)
		}
	})
}

// A client that hangs up while its create is being stored does not cut the
// transaction short: its COMMIT may already be on its way, and a sandbox stored
// provisioning whose Create never started would wait for its claim to lapse. The
// create completes and its Create starts.
func TestCreateOutlivesClientHangUp(t *testing.T) {
	forEachStore(t, func(t *testing.T, st store.Store) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		hs := &hookStore{Store: st, before: cancel}
		e := newEnvScheduledWith(t, st, func(o *httpapi.Options) { o.Store = hs })
		req := httptest.NewRequestWithContext(ctx, "POST", "/v1/sandboxes", strings.NewReader(`{"placement":{"allowedPools":["fake"]}}`))
		req.Header.Set("Authorization", "Bearer "+e.admin)
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		e.handler.ServeHTTP(rec, req)
		if hs.cut {
			t.Fatal("the client's hang-up ended the create's transaction")
		}
		if rec.Code != http.StatusAccepted {
			t.Fatalf("create = %d: %s", rec.Code, rec.Body)
		}
		var sb httpapi.Sandbox
		if err := json.Unmarshal(rec.Body.Bytes(), &sb); err != nil {
			t.Fatal(err)
		}
		// Its Create was started: the sandbox ends up running, not waiting for a claim.
		r := e.do(e.admin, "GET", "/v1/sandboxes/"+sb.Id+"/wait?state=running&timeoutSeconds=30", nil)
		var got httpapi.Sandbox
		r.decode(t, &got)
		if got.State != httpapi.Running {
			t.Fatalf("after the hang-up the sandbox is %s (%v), want running", got.State, got.Reason)
		}
	})
}
