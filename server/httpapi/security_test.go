package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/adapters/fake"
	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/internal/ids"
	"github.com/different-ai/differently/server/httpapi"
	"github.com/different-ai/differently/server/reconcile"
	"github.com/different-ai/differently/server/store"
)

// docOp is one operation of api/openapi.yaml.
type docOp struct {
	id, method, path string
	// body is the request body's media type, "" when the operation takes none.
	body string
	// query are the required query parameters.
	query []string
}

func (o docOp) String() string { return o.method + " " + o.path + " (" + o.id + ")" }

// documentedOps lists every operation of the embedded document, sorted.
func documentedOps(t testing.TB) []docOp {
	t.Helper()
	doc, err := httpapi.GetSwagger()
	if err != nil {
		t.Fatal(err)
	}
	var out []docOp
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			// The embedded copy capitalises operation IDs; the document's are camelCase.
			id := op.OperationID
			if id != "" {
				id = strings.ToLower(id[:1]) + id[1:]
			}
			o := docOp{id: id, method: strings.ToUpper(method), path: path}
			if rb := op.RequestBody; rb != nil && rb.Value != nil {
				for ct := range rb.Value.Content {
					o.body = ct
				}
			}
			for _, p := range slices.Concat(item.Parameters, op.Parameters) {
				if p.Value != nil && p.Value.In == "query" && p.Value.Required {
					o.query = append(o.query, p.Value.Name)
				}
			}
			out = append(out, o)
		}
	}
	slices.SortFunc(out, func(a, b docOp) int { return strings.Compare(a.path+a.method, b.path+b.method) })
	if len(out) < 30 {
		t.Fatalf("only %d documented operations", len(out))
	}
	return out
}

// sampleBodies are valid request bodies, by operation. An operation that takes a
// body and is missing here fails the sweeps: add one.
var sampleBodies = map[string]string{
	"createSandbox":     `{"placement":{"allowedPools":["fake"]}}`,
	"patchSandbox":      `{"labels":{"changed":"yes"},"ttlSeconds":600}`,
	"execSandbox":       `{"command":"echo hi"}`,
	"writeSandboxFile":  `file content`,
	"createSnapshot":    `{}`,
	"forkSandbox":       `{}`,
	"exposeSandboxPort": `{"port":8080}`,
	"createPool":        `{"name":"newpool","adapter":"fake"}`,
	"putPool":           `{"name":"fake","adapter":"fake","region":"changed"}`,
	"patchPool":         `{"region":"changed"}`,
	"putPolicy":         `{"allowExternal":true}`,
	"createToken":       `{"scope":"admin"}`,
	"putProject":        `{"quota":{"sandboxes":1}}`,
	"putProfile":        `{"template":"changed"}`,
}

// sampleQuery are values for required query parameters, by name.
var sampleQuery = map[string]string{"path": "a.txt", "state": "running"}

// call builds the operation's request for path (its parameters filled in) with the
// sample body and query.
func (e *env) call(secret string, o docOp, path string) response {
	e.t.Helper()
	var q []string
	for _, name := range o.query {
		v, ok := sampleQuery[name]
		if !ok {
			e.t.Fatalf("%s: no sample value for the required query parameter %q", o, name)
		}
		q = append(q, name+"="+v)
	}
	if len(q) > 0 {
		path += "?" + strings.Join(q, "&")
	}
	hdr := http.Header{}
	var body []byte
	if o.body != "" {
		b, ok := sampleBodies[o.id]
		if !ok {
			e.t.Fatalf("%s takes a body and sampleBodies has none for it", o)
		}
		body = []byte(b)
		hdr.Set("Content-Type", o.body)
	}
	if body != nil {
		return e.request(secret, o.method, path, bytes.NewReader(body), hdr)
	}
	return e.request(secret, o.method, path, nil, hdr)
}

// spyAdapter is a fake adapter that counts every call about instances and snapshots,
// so a test can tell that a refused request never reached the backend.
type spyAdapter struct {
	*fake.Adapter
	calls atomic.Int64
}

func (s *spyAdapter) Create(ctx context.Context, req adapters.CreateRequest) (adapters.Instance, error) {
	s.calls.Add(1)
	return s.Adapter.Create(ctx, req)
}

func (s *spyAdapter) Get(ctx context.Context, ref string) (adapters.Instance, error) {
	s.calls.Add(1)
	return s.Adapter.Get(ctx, ref)
}

func (s *spyAdapter) Delete(ctx context.Context, ref string) error {
	s.calls.Add(1)
	return s.Adapter.Delete(ctx, ref)
}

func (s *spyAdapter) Exec(ctx context.Context, ref string, req api.ExecRequest) (api.ExecResult, error) {
	s.calls.Add(1)
	return s.Adapter.Exec(ctx, ref, req)
}

func (s *spyAdapter) ExecStream(ctx context.Context, ref string, req api.ExecRequest, emit func(api.ExecEvent) error) (adapters.ExitStatus, error) {
	s.calls.Add(1)
	return s.Adapter.ExecStream(ctx, ref, req, emit)
}

func (s *spyAdapter) ReadFile(ctx context.Context, ref, p string) ([]byte, error) {
	s.calls.Add(1)
	return s.Adapter.ReadFile(ctx, ref, p)
}

func (s *spyAdapter) WriteFile(ctx context.Context, ref, p string, data []byte) error {
	s.calls.Add(1)
	return s.Adapter.WriteFile(ctx, ref, p, data)
}

func (s *spyAdapter) OpenFile(ctx context.Context, ref, p string) (io.ReadCloser, int64, error) {
	s.calls.Add(1)
	return s.Adapter.OpenFile(ctx, ref, p)
}

func (s *spyAdapter) WriteFileFrom(ctx context.Context, ref, p string, content io.Reader) error {
	s.calls.Add(1)
	return s.Adapter.WriteFileFrom(ctx, ref, p, content)
}

func (s *spyAdapter) ListFiles(ctx context.Context, ref, p string) ([]adapters.FileInfo, error) {
	s.calls.Add(1)
	return s.Adapter.ListFiles(ctx, ref, p)
}

func (s *spyAdapter) Stop(ctx context.Context, ref string) error {
	s.calls.Add(1)
	return s.Adapter.Stop(ctx, ref)
}

func (s *spyAdapter) Start(ctx context.Context, ref string) error {
	s.calls.Add(1)
	return s.Adapter.Start(ctx, ref)
}

func (s *spyAdapter) Pause(ctx context.Context, ref string) error {
	s.calls.Add(1)
	return s.Adapter.Pause(ctx, ref)
}

func (s *spyAdapter) Resume(ctx context.Context, ref string) error {
	s.calls.Add(1)
	return s.Adapter.Resume(ctx, ref)
}

func (s *spyAdapter) Snapshot(ctx context.Context, ref string, kind adapters.SnapshotKind) (adapters.Snapshot, error) {
	s.calls.Add(1)
	return s.Adapter.Snapshot(ctx, ref, kind)
}

func (s *spyAdapter) DeleteSnapshot(ctx context.Context, ref string) error {
	s.calls.Add(1)
	return s.Adapter.DeleteSnapshot(ctx, ref)
}

func (s *spyAdapter) ExposePort(ctx context.Context, ref string, port int) (string, error) {
	s.calls.Add(1)
	return s.Adapter.ExposePort(ctx, ref, port)
}

// RenewTTL makes the spy a backend that keeps its own expiry, so PATCH reaches it.
func (s *spyAdapter) RenewTTL(context.Context, string, int64) error {
	s.calls.Add(1)
	return nil
}

// tenantState is everything about one sandbox and its snapshot that a request could
// change, as JSON: the sandbox's row, its snapshots, the snapshot's row, the count of
// sandboxes and snapshots overall, the backend instance and the backend calls.
func (e *env) tenantState(spy *spyAdapter, sandboxID, snapshotID string) string {
	e.t.Helper()
	ctx := context.Background()
	sb, err := e.st.GetSandbox(ctx, sandboxID)
	if err != nil {
		e.t.Fatal(err)
	}
	snaps, err := e.st.ListSnapshots(ctx, sandboxID)
	if err != nil {
		e.t.Fatal(err)
	}
	sn, err := e.st.GetSnapshot(ctx, snapshotID)
	if err != nil {
		e.t.Fatal(err)
	}
	all, _, err := e.st.ListSandboxes(ctx, store.SandboxFilter{Limit: store.MaxLimit})
	if err != nil {
		e.t.Fatal(err)
	}
	inst, err := spy.Inspect(sb.BackendRef)
	if err != nil {
		e.t.Fatal(err)
	}
	raw, err := json.Marshal(map[string]any{"sandbox": sb, "snapshots": snaps, "snapshot": sn, "sandboxes": len(all),
		"instance": fmt.Sprintf("%+v", inst), "backend calls": spy.calls.Load(), "backend snapshots": spy.Snapshots()})
	if err != nil {
		e.t.Fatal(err)
	}
	return string(raw)
}

// sameAnswer fails unless two answers are identical once missing is read as target:
// status, body and headers (Date aside).
func sameAnswer(t *testing.T, what string, got, none response, target, missing string) {
	t.Helper()
	want := strings.ReplaceAll(string(none.body), missing, target)
	if got.status != none.status || string(got.body) != want {
		t.Fatalf("%s: another project's object answers\n%d %s\nbut a missing one answers\n%d %s", what, got.status, got.body, none.status, want)
	}
	for _, h := range []http.Header{got.header, none.header} {
		h.Del("Date")
	}
	if fmt.Sprint(got.header) != fmt.Sprint(none.header) {
		t.Fatalf("%s: headers differ:\n%v\n%v", what, got.header, none.header)
	}
}

// tenantRoute says which object a route acts on: "sandbox", "snapshot", "collection"
// (list and create), "admin" or "public". A route it cannot place fails the test, so a
// new route has to be put in a sweep.
func tenantRoute(t *testing.T, o docOp) string {
	switch {
	case o.path == "/healthz" || o.path == "/readyz" || o.path == "/metrics":
		return "public"
	case o.path == "/v1/admin" || strings.HasPrefix(o.path, "/v1/admin/"):
		return "admin"
	case o.path == "/v1/sandboxes", o.path == "/v1/events", o.path == "/v1/snapshots":
		// Listings, scoped to the caller's project (TestEventsTenancy for events,
		// TestSnapshotListing for snapshots).
		return "collection"
	case strings.HasPrefix(o.path, "/v1/sandboxes/{id}") && strings.Count(o.path, "{") == 1:
		return "sandbox"
	case o.path == "/v1/snapshots/{id}":
		return "snapshot"
	}
	t.Fatalf("%s: the tenancy sweeps do not know this route; add it", o)
	return ""
}

// TestCrossTenantSweep: for every sandbox- and snapshot-scoped operation of the
// document, a token of another project (same organisation) and of another
// organisation (same project name) acting on project B's sandbox or snapshot gets
// exactly the answer an ID that does not exist gets, B's rows, snapshots and backend
// instance are unchanged and its backend is never called; B itself, doing the same,
// is answered about the object (so the sweep does reach it).
func TestCrossTenantSweep(t *testing.T) {
	forEachStore(t, func(t *testing.T, st store.Store) {
		e := newEnv(t, st)
		spy := &spyAdapter{Adapter: fake.New(fake.Config{})}
		e.addPool("spy", spy)
		owner := e.projectToken("acme", "b")
		attackers := map[string]string{
			"another project of the organisation":        e.projectToken("acme", "a"),
			"another organisation's project of the name": e.projectToken("other", "b"),
		}
		swept := 0
		for _, o := range documentedOps(t) {
			kind := tenantRoute(t, o)
			if kind != "sandbox" && kind != "snapshot" {
				continue
			}
			swept++
			t.Run(o.id, func(t *testing.T) {
				e.t = t
				sb := e.running(owner, "spy")
				var snap httpapi.Snapshot
				e.do(owner, "POST", "/v1/sandboxes/"+sb.ID+"/snapshots", map[string]any{}).want(t, http.StatusCreated).decode(t, &snap)
				target, missing := sb.ID, ids.New("sbx")
				if kind == "snapshot" {
					target, missing = snap.Id, ids.New("snap")
				}
				before := e.tenantState(spy, sb.ID, snap.Id)
				for who, tok := range attackers {
					got := e.call(tok, o, strings.Replace(o.path, "{id}", target, 1))
					none := e.call(tok, o, strings.Replace(o.path, "{id}", missing, 1))
					got.want(t, http.StatusNotFound, api.CodeNotFound)
					sameAnswer(t, who, got, none, target, missing)
				}
				if after := e.tenantState(spy, sb.ID, snap.Id); after != before {
					t.Fatalf("another tenant's request changed project b's state:\nbefore %s\nafter  %s", before, after)
				}
				got := e.call(owner, o, strings.Replace(o.path, "{id}", target, 1))
				if got.status == http.StatusNotFound && strings.Contains(string(got.body), target) {
					t.Fatalf("the owner is told its own %s does not exist: %s", kind, got.body)
				}
			})
		}
		e.t = t
		if swept < 15 {
			t.Fatalf("only %d operations swept", swept)
		}
	})
}

// TestCrossTenantCollections: lists never show another tenant's sandboxes, whatever
// the filters and pages; a create from another tenant's snapshot fails exactly as
// one from a missing snapshot; Idempotency-Keys do not reach across tenants.
func TestCrossTenantCollections(t *testing.T) {
	forEachStore(t, func(t *testing.T, st store.Store) {
		e := newEnv(t, st)
		owner := e.projectToken("acme", "b")
		var theirs []string
		for range 3 {
			sb := e.createSandbox(owner, "fake", map[string]any{"labels": map[string]string{"team": "b"}})
			theirs = append(theirs, sb.Id)
		}
		e.provision(theirs[0])
		run := e.running(owner, "devhost")
		theirs = append(theirs, run.ID)
		var snap httpapi.Snapshot
		e.do(owner, "POST", "/v1/sandboxes/"+run.ID+"/snapshots", map[string]any{}).want(t, http.StatusCreated).decode(t, &snap)

		for _, who := range []struct{ org, project string }{{"acme", "a"}, {"other", "b"}} {
			tok := e.projectToken(who.org, who.project)
			mine := e.createSandbox(tok, "fake", map[string]any{"labels": map[string]string{"team": "b"}}).Id
			for _, q := range []string{"", "?project=b", "?project=a", "?pool=fake", "?pool=devhost", "?label=team=b",
				"?state=queued,running", "?limit=1"} {
				seen := map[string]bool{}
				cursor := ""
				for pages := 0; ; pages++ {
					path := "/v1/sandboxes" + q
					if cursor != "" {
						path += map[bool]string{true: "&", false: "?"}[q != ""] + "cursor=" + cursor
					}
					var list httpapi.SandboxList
					e.do(tok, "GET", path, nil).want(t, http.StatusOK).decode(t, &list)
					for _, sb := range list.Items {
						seen[sb.Id] = true
						if sb.Org != who.org || sb.Project != who.project {
							t.Fatalf("%s/%s lists %s of %s/%s with %q", who.org, who.project, sb.Id, sb.Org, sb.Project, q)
						}
					}
					if list.NextCursor == nil || pages > 10 {
						break
					}
					cursor = *list.NextCursor
				}
				for _, id := range theirs {
					if seen[id] {
						t.Fatalf("%s/%s lists project b's %s with %q", who.org, who.project, id, q)
					}
				}
				// (Not yet placed, it is on no pool.)
				if wantMine := q == "" || q == "?label=team=b" || q == "?limit=1" ||
					q == "?state=queued,running" || q == "?project="+who.project; seen[mine] != wantMine {
					t.Fatalf("%s/%s with %q: own sandbox listed %v", who.org, who.project, q, seen[mine])
				}
			}

			// A create from another tenant's snapshot, as from a missing one.
			missing := ids.New("snap")
			got := e.do(tok, "POST", "/v1/sandboxes", map[string]any{"fromSnapshot": snap.Id}).want(t, http.StatusNotFound, api.CodeNotFound)
			none := e.do(tok, "POST", "/v1/sandboxes", map[string]any{"fromSnapshot": missing})
			sameAnswer(t, "create from another tenant's snapshot", got, none, snap.Id, missing)
			// Creating in another project is refused outright.
			e.do(tok, "POST", "/v1/sandboxes", map[string]any{"org": "acme", "project": "b"}).want(t, http.StatusForbidden, api.CodeForbidden)
		}
		// The owner still sees exactly its own.
		var list httpapi.SandboxList
		e.do(owner, "GET", "/v1/sandboxes", nil).want(t, http.StatusOK).decode(t, &list)
		if len(list.Items) != len(theirs) {
			t.Fatalf("project b lists %d sandboxes, want %d", len(list.Items), len(theirs))
		}
	})
}

// TestIdempotencyKeysStayInTheirTenant: a key another tenant used creates a new
// sandbox, never answers with theirs.
func TestIdempotencyKeysStayInTheirTenant(t *testing.T) {
	forEachStore(t, func(t *testing.T, st store.Store) {
		e := newEnv(t, st)
		create := func(tok string) response {
			return e.request(tok, "POST", "/v1/sandboxes", strings.NewReader(`{"placement":{"allowedPools":["fake"]}}`),
				http.Header{"Idempotency-Key": {"deploy-42"}})
		}
		var first httpapi.Sandbox
		create(e.projectToken("acme", "b")).want(t, http.StatusAccepted).decode(t, &first)

		var other httpapi.Sandbox
		create(e.projectToken("acme", "a")).want(t, http.StatusAccepted).decode(t, &other)
		if other.Id == first.Id || other.Project != "a" {
			t.Fatalf("another project's key answered %+v", other)
		}

		// Another organisation's project of the same name neither learns that the key
		// was used nor is kept from using it.
		r := create(e.projectToken("other", "b"))
		var cross httpapi.Sandbox
		r.want(t, http.StatusAccepted).decode(t, &cross)
		if cross.Id == first.Id || cross.Org != "other" {
			t.Fatalf("another organisation's key answered %+v", cross)
		}
	})
}

// TestPoolsOutsideThePolicyAreUnusable: project tokens cannot see pools (admin
// routes), and cannot place a sandbox on an external pool the policy does not allow.
func TestPoolsOutsideThePolicyAreUnusable(t *testing.T) {
	forEachStore(t, func(t *testing.T, st store.Store) {
		e := newEnv(t, st)
		e.do(e.admin, "POST", "/v1/admin/pools", map[string]any{"name": "hosted", "adapter": "fake", "trust": "external"}).
			want(t, http.StatusCreated)
		tok := e.projectToken("acme", "b")
		e.do(tok, "GET", "/v1/admin/pools", nil).want(t, http.StatusForbidden, api.CodeForbidden)
		e.do(tok, "GET", "/v1/admin/pools/hosted", nil).want(t, http.StatusForbidden, api.CodeForbidden)
		pinned := map[string]any{"placement": map[string]any{"allowedPools": []string{"hosted"}}}
		e.do(tok, "POST", "/v1/sandboxes", pinned).want(t, http.StatusBadRequest, api.CodeInvalidRequest)
		e.do(e.admin, "PUT", "/v1/admin/policy", map[string]any{"allowExternal": true, "externalPools": []string{"other"}}).
			want(t, http.StatusOK)
		e.do(tok, "POST", "/v1/sandboxes", pinned).want(t, http.StatusBadRequest, api.CodeInvalidRequest)
		var list httpapi.SandboxList
		e.do(e.admin, "GET", "/v1/sandboxes", nil).want(t, http.StatusOK).decode(t, &list)
		if len(list.Items) != 0 {
			t.Fatalf("refused creates stored %d sandboxes", len(list.Items))
		}
		e.do(e.admin, "PUT", "/v1/admin/policy", map[string]any{"allowExternal": true, "externalPools": []string{"hosted"}}).
			want(t, http.StatusOK)
		e.do(tok, "POST", "/v1/sandboxes", pinned).want(t, http.StatusAccepted)
	})
}

// countingReconciler counts passes run on demand.
type countingReconciler struct{ n atomic.Int64 }

func (c *countingReconciler) ReconcileBy(context.Context, string) (reconcile.Report, error) {
	c.n.Add(1)
	return reconcile.Report{}, nil
}

// adminState is everything an admin route can change, as JSON (tokens' lastUsedAt
// aside: using a token is what a request does).
func (e *env) adminState(rec *countingReconciler) string {
	e.t.Helper()
	ctx := context.Background()
	pools, err := e.st.ListPools(ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	policy, err := e.st.GetPolicy(ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	toks, err := e.st.ListTokens(ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	for i := range toks {
		toks[i].LastUsedAt = nil
	}
	projects, err := e.st.ListProjects(ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	profiles, err := e.st.ListProfiles(ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	sbs, _, err := e.st.ListSandboxes(ctx, store.SandboxFilter{Limit: store.MaxLimit})
	if err != nil {
		e.t.Fatal(err)
	}
	raw, err := json.Marshal(map[string]any{"pools": pools, "policy": policy, "tokens": toks, "projects": projects,
		"profiles": profiles, "sandboxes": sbs, "views": len(e.pools.Views()), "reconciles": rec.n.Load(),
		"wakes": e.waker.n.Load()})
	if err != nil {
		e.t.Fatal(err)
	}
	return string(raw)
}

// TestAdminRoutesRefuseProjectTokens: every operation under /v1/admin of the
// document answers a project token 403 forbidden (and no token at all 401) and
// changes nothing; an admin token doing the same reaches the route.
func TestAdminRoutesRefuseProjectTokens(t *testing.T) {
	forEachStore(t, func(t *testing.T, st store.Store) {
		rec := &countingReconciler{}
		e := newEnvWith(t, st, func(o *httpapi.Options) { o.Reconciler = rec })
		tok := e.projectToken("acme", "b")
		e.running(tok, "fake")
		e.do(e.admin, "PUT", "/v1/admin/profiles/ci", map[string]any{}).want(t, http.StatusOK)
		e.do(e.admin, "PUT", "/v1/admin/projects/acme/b", map[string]any{}).want(t, http.StatusOK)
		var created httpapi.TokenCreated
		e.do(e.admin, "POST", "/v1/admin/tokens", map[string]any{"scope": "project", "project": "x"}).
			want(t, http.StatusCreated).decode(t, &created)
		fill := strings.NewReplacer("/pools/{name}", "/pools/fake", "/profiles/{name}", "/profiles/ci",
			"/tokens/{id}", "/tokens/"+created.Token.Id, "{org}", "acme", "{project}", "b")

		swept := 0
		for _, o := range documentedOps(t) {
			if tenantRoute(t, o) != "admin" {
				continue
			}
			swept++
			path := fill.Replace(o.path)
			if strings.Contains(path, "{") {
				t.Fatalf("%s: no value for a path parameter", o)
			}
			before := e.adminState(rec)
			r := e.call(tok, o, path).want(t, http.StatusForbidden, api.CodeForbidden)
			if msg := r.apiError(t).Message; msg != "this route needs an admin token" {
				t.Fatalf("%s: %q", o, msg)
			}
			r = e.call("", o, path).want(t, http.StatusUnauthorized, api.CodeUnauthenticated)
			if r.header.Get("WWW-Authenticate") == "" {
				t.Fatalf("%s: 401 without WWW-Authenticate", o)
			}
			if after := e.adminState(rec); after != before {
				t.Fatalf("%s by a project token changed state:\nbefore %s\nafter  %s", o, before, after)
			}
			// An admin is let through to the route itself: not refused, and not
			// answered as a route that does not exist.
			r = e.call(e.admin, o, path)
			if r.status == http.StatusForbidden || r.status == http.StatusUnauthorized || r.status == http.StatusMethodNotAllowed ||
				r.status == http.StatusNotFound && strings.Contains(string(r.body), "no route") {
				t.Fatalf("%s: admin answered %d %s", o, r.status, r.body)
			}
		}
		if swept < 20 {
			t.Fatalf("only %d admin operations swept", swept)
		}
	})
}
