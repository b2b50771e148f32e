package httpapi_test

import (
	"context"
	"math"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/server/httpapi"
	"github.com/different-ai/differently/server/store"
)

func TestProjects(t *testing.T) {
	forEachStore(t, func(t *testing.T, st store.Store) {
		e := newEnv(t, st)
		var p httpapi.Project
		// Never put: exists implicitly, without quota; every quota field is present.
		r := e.do(e.admin, "GET", "/v1/admin/projects/acme/ci", nil).want(t, http.StatusOK)
		r.decode(t, &p)
		if p.Declared || p.Org != "acme" || p.Name != "ci" || p.Cost != 0 || p.Usage != (httpapi.ProjectUsage{}) ||
			*p.Quota.Sandboxes != 0 || *p.Quota.Cpu != 0 || *p.Quota.MemoryMiB != 0 || *p.Quota.DiskGiB != 0 {
			t.Fatalf("implicit project: %s", r.body)
		}
		e.do(e.admin, "DELETE", "/v1/admin/projects/acme/ci", nil).want(t, http.StatusNotFound, api.CodeNotFound)

		// PUT is idempotent and replaces the quota; absent fields are 0.
		spec := map[string]any{"quota": map[string]any{"sandboxes": 3, "cpu": 4, "memoryMiB": 8192}}
		e.do(e.admin, "PUT", "/v1/admin/projects/acme/ci", spec).want(t, http.StatusOK).decode(t, &p)
		if !p.Declared || *p.Quota.Sandboxes != 3 || *p.Quota.Cpu != 4 || *p.Quota.MemoryMiB != 8192 || *p.Quota.DiskGiB != 0 ||
			p.CreatedAt == nil {
			t.Fatalf("put: %+v", p)
		}
		e.do(e.admin, "PUT", "/v1/admin/projects/acme/ci", spec).want(t, http.StatusOK)
		e.do(e.admin, "GET", "/v1/admin/projects/acme/ci", nil).want(t, http.StatusOK).decode(t, &p)
		if !p.Declared || *p.Quota.Sandboxes != 3 {
			t.Fatalf("get after put: %+v", p)
		}

		// Bad input.
		e.do(e.admin, "PUT", "/v1/admin/projects/acme/ci", map[string]any{"quota": map[string]any{"cpu": -1}}).
			want(t, http.StatusBadRequest, api.CodeInvalidRequest)
		e.do(e.admin, "PUT", "/v1/admin/projects/acme/ci", map[string]any{"quota": map[string]any{"gpus": 1}}).
			want(t, http.StatusBadRequest, api.CodeInvalidRequest)
		// Admin only.
		tok := e.projectToken("acme", "ci")
		e.do(tok, "GET", "/v1/admin/projects/acme/ci", nil).want(t, http.StatusForbidden, api.CodeForbidden)
		e.do(tok, "PUT", "/v1/admin/projects/acme/ci", spec).want(t, http.StatusForbidden, api.CodeForbidden)

		// Usage and cost: devhost costs 1 per CPU-hour and 0.5 per GiB-hour.
		sb := e.createSandbox(tok, "devhost", map[string]any{"resources": map[string]any{"cpu": 2, "memoryMiB": 1024, "diskGiB": 5}})
		e.provision(sb.Id)
		e.createSandbox(e.projectToken("acme", "other"), "fake", nil)
		e.clk.Advance(time.Hour)
		e.do(e.admin, "GET", "/v1/admin/projects/acme/ci", nil).want(t, http.StatusOK).decode(t, &p)
		if p.Usage != (httpapi.ProjectUsage{Sandboxes: 1, Cpu: 2, MemoryMiB: 1024, DiskGiB: 5}) {
			t.Fatalf("usage %+v", p.Usage)
		}
		var got httpapi.Sandbox
		e.do(tok, "GET", "/v1/sandboxes/"+sb.Id, nil).want(t, http.StatusOK).decode(t, &got)
		if math.Abs(p.Cost-2.5) > 1e-9 || got.Cost == nil || math.Abs(*got.Cost-p.Cost) > 1e-9 {
			t.Fatalf("project cost %v, sandbox cost %v; want 2.5 for both", p.Cost, got.Cost)
		}

		// The list holds declared projects and those with sandboxes, sorted.
		e.do(e.admin, "PUT", "/v1/admin/projects/acme/empty", map[string]any{}).want(t, http.StatusOK)
		var list httpapi.ProjectList
		e.do(e.admin, "GET", "/v1/admin/projects", nil).want(t, http.StatusOK).decode(t, &list)
		var names []string
		for _, it := range list.Items {
			names = append(names, it.Org+"/"+it.Name)
			if it.Name == "ci" && (math.Abs(it.Cost-2.5) > 1e-9 || it.Usage.Sandboxes != 1 || !it.Declared) {
				t.Fatalf("listed ci: %+v", it)
			}
			if it.Name == "other" && (it.Declared || it.Usage.Sandboxes != 1) {
				t.Fatalf("listed other: %+v", it)
			}
		}
		if len(names) != 3 || names[0] != "acme/ci" || names[1] != "acme/empty" || names[2] != "acme/other" {
			t.Fatalf("list %v", names)
		}

		// Delete is refused while the project has live sandboxes.
		e.do(e.admin, "DELETE", "/v1/admin/projects/acme/ci", nil).want(t, http.StatusConflict, api.CodeInvalidState)
		e.terminate(sb.Id)
		e.do(e.admin, "DELETE", "/v1/admin/projects/acme/ci", nil).want(t, http.StatusNoContent)
		e.do(e.admin, "GET", "/v1/admin/projects/acme/ci", nil).want(t, http.StatusOK).decode(t, &p)
		if p.Declared || *p.Quota.Sandboxes != 0 || math.Abs(p.Cost-2.5) > 1e-9 {
			t.Fatalf("after delete: %+v", p)
		}
	})
}

// terminate does what the scheduler would after a delete.
func (e *env) terminate(id string) {
	e.t.Helper()
	if _, err := e.st.UpdateSandbox(context.Background(), id, e.clk.Now(), func(cur *store.Sandbox) error {
		cur.State = store.StateTerminated
		return nil
	}); err != nil {
		e.t.Fatal(err)
	}
}

func TestQuotaAtAdmission(t *testing.T) {
	forEachStore(t, func(t *testing.T, st store.Store) {
		e := newEnv(t, st)
		tok := e.projectToken("acme", "ci")
		e.do(e.admin, "PUT", "/v1/admin/projects/acme/ci",
			map[string]any{"quota": map[string]any{"sandboxes": 2, "cpu": 3}}).want(t, http.StatusOK)
		create := func(cpu float64, key string) response {
			h := http.Header{}
			if key != "" {
				h.Set("Idempotency-Key", key)
			}
			body := `{"placement": {"allowedPools": ["fake"]}, "resources": {"cpu": ` + strconv.FormatFloat(cpu, 'f', -1, 64) + `}}`
			return e.request(tok, "POST", "/v1/sandboxes", strings.NewReader(body), h)
		}
		var first httpapi.Sandbox
		create(1, "k1").want(t, http.StatusAccepted).decode(t, &first)
		// 1 + 2.5 CPUs > 3.
		r := create(2.5, "").want(t, http.StatusTooManyRequests, api.CodeQuotaExceeded)
		if msg := r.apiError(t).Message; msg != "project acme/ci would use 3.5 of 3 CPUs" {
			t.Fatalf("message %q", msg)
		}
		create(2, "").want(t, http.StatusAccepted)
		r = create(0.5, "").want(t, http.StatusTooManyRequests, api.CodeQuotaExceeded)
		ae := r.apiError(t)
		if ae.Message != "project acme/ci would use 3 of 2 sandboxes" || ae.Details["quota"] != "sandboxes" {
			t.Fatalf("error %+v", ae)
		}
		// A retried create is answered with its sandbox even at the quota.
		var again httpapi.Sandbox
		create(1, "k1").want(t, http.StatusOK).decode(t, &again)
		if again.Id != first.Id {
			t.Fatalf("retry made %s, want %s", again.Id, first.Id)
		}
		// Other projects are not limited by this one's quota.
		e.createSandbox(e.projectToken("acme", "free"), "fake", nil)
		// A sandbox that ended frees its share. This one is still queued (no scheduler
		// runs here), so it has no instance and its delete ends it at once.
		var ended httpapi.Sandbox
		e.do(tok, "DELETE", "/v1/sandboxes/"+first.Id, nil).want(t, http.StatusAccepted).decode(t, &ended)
		if ended.State != httpapi.Terminated {
			t.Fatalf("deleted queued sandbox is %s", ended.State)
		}
		create(1, "").want(t, http.StatusAccepted)
	})
}

// TestQuotaCountsUnsetResources: a sandbox that leaves a resource unset gets its
// pool's default size, which the quota cannot count; in a project whose quota limits
// that resource the create must say how much it wants, or a project limited to one CPU
// could run any number of default-sized sandboxes. A profile's resources count.
func TestQuotaCountsUnsetResources(t *testing.T) {
	forEachStore(t, func(t *testing.T, st store.Store) {
		e := newEnv(t, st)
		tok := e.projectToken("acme", "ci")
		e.do(e.admin, "PUT", "/v1/admin/projects/acme/ci",
			map[string]any{"quota": map[string]any{"cpu": 1, "memoryMiB": 2048}}).want(t, http.StatusOK)
		for range 3 {
			r := e.do(tok, "POST", "/v1/sandboxes", map[string]any{"placement": map[string]any{"allowedPools": []string{"fake"}}})
			wantField(t, r, "resources.cpu")
		}
		wantField(t, e.do(tok, "POST", "/v1/sandboxes", map[string]any{
			"placement": map[string]any{"allowedPools": []string{"fake"}}, "resources": map[string]any{"cpu": 1}}),
			"resources.memoryMiB")
		e.do(e.admin, "PUT", "/v1/admin/profiles/small",
			map[string]any{"resources": map[string]any{"cpu": 1, "memoryMiB": 1024}}).want(t, http.StatusOK)
		e.createSandbox(tok, "fake", map[string]any{"profile": "small"})
		e.do(tok, "POST", "/v1/sandboxes", map[string]any{"profile": "small", "placement": map[string]any{"allowedPools": []string{"fake"}}}).
			want(t, http.StatusTooManyRequests, api.CodeQuotaExceeded)
		var p httpapi.Project
		e.do(e.admin, "GET", "/v1/admin/projects/acme/ci", nil).want(t, http.StatusOK).decode(t, &p)
		if p.Usage.Sandboxes != 1 || p.Usage.Cpu != 1 {
			t.Fatalf("usage %+v", p.Usage)
		}
		// A project whose quota counts sandboxes only takes default sizes.
		e.do(e.admin, "PUT", "/v1/admin/projects/acme/ci", map[string]any{"quota": map[string]any{"sandboxes": 5}}).want(t, http.StatusOK)
		e.createSandbox(tok, "fake", nil)
	})
}

// TestDeletedProjectTokens: deleting a project revokes its tokens, which would
// otherwise go on creating sandboxes that no quota bounds; other projects' stay.
func TestDeletedProjectTokens(t *testing.T) {
	forEachStore(t, func(t *testing.T, st store.Store) {
		e := newEnv(t, st)
		e.do(e.admin, "PUT", "/v1/admin/projects/acme/ci", map[string]any{"quota": map[string]any{"sandboxes": 1}}).want(t, http.StatusOK)
		mint := func(project string) string {
			var out httpapi.TokenCreated
			e.do(e.admin, "POST", "/v1/admin/tokens", map[string]any{"scope": "project", "org": "acme", "project": project}).
				want(t, http.StatusCreated).decode(t, &out)
			return out.Secret
		}
		tok, other := mint("ci"), mint("other")
		// Used once, so that the replica has it cached.
		e.do(tok, "GET", "/v1/sandboxes", nil).want(t, http.StatusOK)
		sb := e.createSandbox(tok, "fake", nil)

		// Refused while the project has a live sandbox; the token still works.
		e.do(e.admin, "DELETE", "/v1/admin/projects/acme/ci", nil).want(t, http.StatusConflict, api.CodeInvalidState)
		e.do(tok, "GET", "/v1/sandboxes", nil).want(t, http.StatusOK)
		e.terminate(sb.Id)

		e.do(e.admin, "DELETE", "/v1/admin/projects/acme/ci", nil).want(t, http.StatusNoContent)
		e.do(tok, "GET", "/v1/sandboxes", nil).want(t, http.StatusUnauthorized, api.CodeUnauthenticated)
		e.do(tok, "POST", "/v1/sandboxes", map[string]any{"placement": map[string]any{"allowedPools": []string{"fake"}}}).
			want(t, http.StatusUnauthorized, api.CodeUnauthenticated)
		e.do(other, "GET", "/v1/sandboxes", nil).want(t, http.StatusOK)
		var list httpapi.TokenList
		e.do(e.admin, "GET", "/v1/admin/tokens", nil).want(t, http.StatusOK).decode(t, &list)
		for _, it := range list.Items {
			if it.Project != nil && *it.Project == "ci" {
				t.Fatalf("token %s of the deleted project is listed", it.Id)
			}
		}
	})
}

func TestQueueBound(t *testing.T) {
	forEachStore(t, func(t *testing.T, st store.Store) {
		e := newEnvWith(t, st, func(o *httpapi.Options) { o.MaxQueued = 2 })
		a := e.createSandbox(e.admin, "fake", nil)
		e.createSandbox(e.projectToken("acme", "ci"), "fake", nil)
		r := e.do(e.admin, "POST", "/v1/sandboxes", map[string]any{"placement": map[string]any{"allowedPools": []string{"fake"}}}).
			want(t, http.StatusServiceUnavailable, api.CodeProviderUnavailable)
		if got := r.header.Get("Retry-After"); got != "5" {
			t.Fatalf("Retry-After %q, want 5", got)
		}
		if msg := r.apiError(t).Message; msg != "the queue is full (it holds at most 2 sandboxes waiting for a pool); try again later" {
			t.Fatalf("message %q", msg)
		}
		// Once one leaves the queue there is room again.
		e.provision(a.Id)
		e.createSandbox(e.admin, "fake", nil)
	})
}

func TestProfiles(t *testing.T) {
	forEachStore(t, func(t *testing.T, st store.Store) {
		e := newEnv(t, st)
		e.do(e.admin, "GET", "/v1/admin/profiles/ci", nil).want(t, http.StatusNotFound, api.CodeNotFound)
		spec := map[string]any{
			"capabilities": []string{"files", "exec", "files"},
			"resources":    map[string]any{"cpu": 2, "memoryMiB": 2048},
			"template":     "python",
			"placement":    map[string]any{"allowedPools": []string{"fake"}},
			"ttlSeconds":   600,
		}
		var p httpapi.Profile
		e.do(e.admin, "PUT", "/v1/admin/profiles/ci", spec).want(t, http.StatusOK).decode(t, &p)
		if p.Name != "ci" || len(p.Capabilities) != 2 || p.Capabilities[0] != "exec" || p.Capabilities[1] != "files" ||
			p.Resources.CPU != 2 || p.Resources.MemoryMiB != 2048 || *p.Template != "python" || p.TtlSeconds != 600 ||
			(*p.Placement.AllowedPools)[0] != "fake" || p.Placement.Regions != nil {
			t.Fatalf("put: %+v", p)
		}
		created := p.CreatedAt
		e.clk.Advance(time.Minute)
		e.do(e.admin, "PUT", "/v1/admin/profiles/ci", spec).want(t, http.StatusOK).decode(t, &p)
		if !p.CreatedAt.Equal(created) || !p.UpdatedAt.After(created) {
			t.Fatalf("replace: %+v", p)
		}
		e.do(e.admin, "PUT", "/v1/admin/profiles/eu", map[string]any{"placement": map[string]any{"regions": []string{"eu"}}}).
			want(t, http.StatusOK).decode(t, &p)
		if p.Placement == nil || p.Placement.AllowedPools != nil || (*p.Placement.Regions)[0] != "eu" {
			t.Fatalf("regions: %+v", p)
		}
		e.do(e.admin, "PUT", "/v1/admin/profiles/min", map[string]any{}).want(t, http.StatusOK).decode(t, &p)
		if p.Placement != nil || p.Template != nil || len(p.Capabilities) != 0 || p.TtlSeconds != 0 {
			t.Fatalf("minimal profile: %+v", p)
		}
		var list httpapi.ProfileList
		e.do(e.admin, "GET", "/v1/admin/profiles", nil).want(t, http.StatusOK).decode(t, &list)
		if len(list.Items) != 3 || list.Items[0].Name != "ci" || list.Items[1].Name != "eu" || list.Items[2].Name != "min" {
			t.Fatalf("list %+v", list)
		}

		// Bad input and admin only.
		for _, bad := range []struct {
			name string
			body any
		}{
			{"ci", map[string]any{"capabilities": []string{"teleport"}}},
			{"ci", map[string]any{"ttlSeconds": -1}},
			{"ci", map[string]any{"resources": map[string]any{"cpu": -1}}},
			{"ci", map[string]any{"placement": map[string]any{"allowedPools": []string{"Bad Pool"}}}},
			{"ci", map[string]any{"unknown": 1}},
			{"Not_A_Name", map[string]any{}},
		} {
			e.do(e.admin, "PUT", "/v1/admin/profiles/"+bad.name, bad.body).want(t, http.StatusBadRequest, api.CodeInvalidRequest)
		}
		tok := e.projectToken("acme", "ci")
		e.do(tok, "PUT", "/v1/admin/profiles/x", map[string]any{}).want(t, http.StatusForbidden, api.CodeForbidden)

		// A create with the profile: capabilities added, unset fields filled.
		var sb httpapi.Sandbox
		e.do(tok, "POST", "/v1/sandboxes", map[string]any{
			"profile": "ci", "capabilities": []string{"exec.stream"}, "resources": map[string]any{"memoryMiB": 512},
		}).want(t, http.StatusAccepted).decode(t, &sb)
		if *sb.Profile != "ci" || len(sb.Capabilities) != 3 || sb.Resources.CPU != 2 || sb.Resources.MemoryMiB != 512 ||
			*sb.Template != "python" || *sb.TtlSeconds != 600 || (*sb.Placement.AllowedPools)[0] != "fake" {
			t.Fatalf("sandbox from profile: %+v", sb)
		}
		// What the request sets wins, an explicit ttlSeconds 0 included.
		e.do(tok, "POST", "/v1/sandboxes", map[string]any{
			"profile": "ci", "template": "node", "ttlSeconds": 0, "placement": map[string]any{"allowedPools": []string{"nostream"}},
		}).want(t, http.StatusAccepted).decode(t, &sb)
		if *sb.Template != "node" || sb.TtlSeconds == nil || *sb.TtlSeconds != 0 || (*sb.Placement.AllowedPools)[0] != "nostream" {
			t.Fatalf("request over profile: %+v", sb)
		}
		e.do(tok, "POST", "/v1/sandboxes", map[string]any{"profile": "nope"}).want(t, http.StatusBadRequest, api.CodeInvalidRequest)
		// A profile's ttlSeconds 0 is no expiry, as the API document has it, not a
		// gap for the policy's default to fill; without a profile the default applies.
		var forever, plain httpapi.Sandbox
		e.do(tok, "POST", "/v1/sandboxes", map[string]any{"profile": "min", "placement": map[string]any{"allowedPools": []string{"fake"}}}).
			want(t, http.StatusAccepted).decode(t, &forever)
		e.do(tok, "POST", "/v1/sandboxes", map[string]any{"placement": map[string]any{"allowedPools": []string{"fake"}}}).
			want(t, http.StatusAccepted).decode(t, &plain)
		if forever.TtlSeconds == nil || *forever.TtlSeconds != 0 || plain.TtlSeconds == nil || *plain.TtlSeconds != httpapi.DefaultTTLSeconds {
			t.Fatalf("ttl from a profile of 0: %v; without a profile: %v", forever.TtlSeconds, plain.TtlSeconds)
		}

		// Delete; sandboxes keep what the profile gave them.
		e.do(e.admin, "DELETE", "/v1/admin/profiles/ci", nil).want(t, http.StatusNoContent)
		e.do(e.admin, "DELETE", "/v1/admin/profiles/ci", nil).want(t, http.StatusNotFound, api.CodeNotFound)
		e.do(tok, "GET", "/v1/sandboxes/"+sb.Id, nil).want(t, http.StatusOK).decode(t, &sb)
		if *sb.Profile != "ci" || *sb.Template != "node" {
			t.Fatalf("after profile delete: %+v", sb)
		}
	})
}
