package httpapi_test

import (
	"context"
	"errors"
	"math"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/internal/ids"
	"github.com/different-ai/differently/server/httpapi"
	"github.com/different-ai/differently/server/store"
)

// wantField checks a 400 invalid_request whose message names field.
func wantField(t *testing.T, r response, field string) {
	t.Helper()
	r.want(t, http.StatusBadRequest, api.CodeInvalidRequest)
	if msg := r.apiError(t).Message; !strings.Contains(msg, field) {
		t.Fatalf("message %q does not name %s", msg, field)
	}
}

// TestResourceBounds: a resource past the bounds of api/limits.go is refused with the
// field named, wherever resources are taken (create, profile, quota), and sums over
// rows stored before the bounds saturate instead of failing every answer that shows
// the project.
func TestResourceBounds(t *testing.T) {
	forEachStore(t, func(t *testing.T, st store.Store) {
		e := newEnv(t, st)
		tok := e.projectToken("acme", "ci")
		create := func(resources string) response {
			body := `{"placement": {"allowedPools": ["fake"]}, "resources": ` + resources + `}`
			return e.request(tok, "POST", "/v1/sandboxes", strings.NewReader(body), nil)
		}
		for _, c := range []struct{ resources, field string }{
			{`{"memoryMiB": 9223372036854775807}`, "resources.memoryMiB"},
			{`{"memoryMiB": ` + strconv.Itoa(api.MaxMemoryMiB+1) + `}`, "resources.memoryMiB"},
			{`{"cpu": 1e308}`, "resources.cpu"},
			{`{"cpu": 1024.5}`, "resources.cpu"},
			{`{"diskGiB": ` + strconv.Itoa(api.MaxDiskGiB+1) + `}`, "resources.diskGiB"},
			{`{"cpu": -1}`, "resources.cpu"},
		} {
			wantField(t, create(c.resources), c.field)
		}
		create(`{"cpu": 2, "memoryMiB": 4096, "diskGiB": 10}`).want(t, http.StatusAccepted)

		wantField(t, e.do(e.admin, "PUT", "/v1/admin/profiles/big",
			map[string]any{"resources": map[string]any{"cpu": 1e308}}), "resources.cpu")
		e.do(e.admin, "GET", "/v1/admin/profiles/big", nil).want(t, http.StatusNotFound, api.CodeNotFound)

		for _, c := range []struct {
			quota map[string]any
			field string
		}{
			{map[string]any{"cpu": 1e308}, "quota.cpu"},
			{map[string]any{"memoryMiB": int64(math.MaxInt64)}, "quota.memoryMiB"},
			{map[string]any{"diskGiB": int64(api.MaxQuotaDiskGiB + 1)}, "quota.diskGiB"},
			{map[string]any{"sandboxes": api.MaxQuotaSandboxes + 1}, "quota.sandboxes"},
		} {
			wantField(t, e.do(e.admin, "PUT", "/v1/admin/projects/acme/ci", map[string]any{"quota": c.quota}), c.field)
		}
		var p httpapi.Project
		e.do(e.admin, "GET", "/v1/admin/projects/acme/ci", nil).want(t, http.StatusOK).decode(t, &p)
		if p.Declared {
			t.Fatalf("a refused quota was stored: %+v", p)
		}

		// Rows from before the bounds: two sandboxes at the old extremes.
		ctx := context.Background()
		for range 2 {
			sb := store.Sandbox{ID: ids.New("sbx"), Org: "acme", Project: "old", State: store.StateRunning, Pool: "devhost",
				Resources: adapters.Resources{CPU: 1e308, MemoryMiB: math.MaxInt64, DiskGiB: math.MaxInt64}}
			if _, _, err := st.CreateSandbox(ctx, e.clk.Now(), sb); err != nil {
				t.Fatal(err)
			}
		}
		e.clk.Advance(3600e9)
		e.do(e.admin, "GET", "/v1/admin/projects", nil).want(t, http.StatusOK)
		e.do(e.admin, "GET", "/v1/admin/projects/acme/old", nil).want(t, http.StatusOK).decode(t, &p)
		if p.Usage.MemoryMiB != math.MaxInt64 || p.Usage.Cpu != math.MaxFloat64 || p.Usage.Sandboxes != 2 {
			t.Fatalf("usage %+v, want saturated sums", p.Usage)
		}
		e.do(e.admin, "PUT", "/v1/admin/projects/acme/old", map[string]any{"quota": map[string]any{"cpu": 4}}).
			want(t, http.StatusOK).decode(t, &p)
		if !p.Declared || *p.Quota.Cpu != 4 {
			t.Fatalf("quota put: %+v", p)
		}
		old := e.projectToken("acme", "old")
		e.request(old, "POST", "/v1/sandboxes", strings.NewReader(`{"placement": {"allowedPools": ["fake"]}, "resources": {"cpu": 1}}`), nil).
			want(t, http.StatusTooManyRequests, api.CodeQuotaExceeded)
	})
}

// TestTTLBounds: a ttlSeconds past api.MaxTTLSeconds is refused on every path that
// takes one, where it used to overflow into an expiry in the past and end the sandbox
// at once; the bound itself is accepted and expires in the future.
func TestTTLBounds(t *testing.T) {
	forEachStore(t, func(t *testing.T, st store.Store) {
		e := newEnv(t, st)
		tooLong := int64(api.MaxTTLSeconds + 1)
		huge := int64(9223372037) // past it, time.Duration overflows
		for _, ttl := range []int64{tooLong, huge} {
			wantField(t, e.do(e.admin, "POST", "/v1/sandboxes", map[string]any{
				"placement": map[string]any{"allowedPools": []string{"fake"}}, "ttlSeconds": ttl}), "ttlSeconds")
			wantField(t, e.do(e.admin, "PUT", "/v1/admin/profiles/long", map[string]any{"ttlSeconds": ttl}), "ttlSeconds")
			wantField(t, e.do(e.admin, "PUT", "/v1/admin/policy", map[string]any{"defaults": map[string]any{"ttlSeconds": ttl}}),
				"defaults.ttlSeconds")
		}

		sb := e.running(e.admin, "devhost")
		base := "/v1/sandboxes/" + sb.ID
		wantField(t, e.do(e.admin, "PATCH", base, map[string]any{"ttlSeconds": huge}), "ttlSeconds")
		wantField(t, e.do(e.admin, "POST", base+"/fork", map[string]any{"ttlSeconds": huge}), "ttlSeconds")
		var snaps httpapi.SnapshotList
		e.do(e.admin, "GET", base+"/snapshots", nil).want(t, http.StatusOK).decode(t, &snaps)
		if len(snaps.Items) != 0 {
			t.Fatalf("a refused fork took a snapshot: %+v", snaps)
		}

		var got httpapi.Sandbox
		e.do(e.admin, "PATCH", base, map[string]any{"ttlSeconds": api.MaxTTLSeconds}).want(t, http.StatusOK).decode(t, &got)
		if got.State != httpapi.Running || got.ExpiresAt == nil || !got.ExpiresAt.After(e.clk.Now().AddDate(9, 0, 0)) {
			t.Fatalf("patched to the bound: %+v", got)
		}
	})
}

// TestTemplateBound: a template name is at most api.MaxTemplateBytes, on a create and
// in a profile.
func TestTemplateBound(t *testing.T) {
	forEachStore(t, func(t *testing.T, st store.Store) {
		e := newEnv(t, st)
		long := strings.Repeat("t", api.MaxTemplateBytes+1)
		wantField(t, e.do(e.admin, "POST", "/v1/sandboxes", map[string]any{
			"placement": map[string]any{"allowedPools": []string{"fake"}}, "template": long}), "template")
		wantField(t, e.do(e.admin, "PUT", "/v1/admin/profiles/long", map[string]any{"template": long}), "template")
		// A profile name that cannot exist is refused as such, without echoing it whole.
		r := e.do(e.admin, "POST", "/v1/sandboxes", map[string]any{"profile": strings.Repeat("p", 100000)})
		r.want(t, http.StatusBadRequest, api.CodeInvalidRequest)
		if len(r.body) > 2000 {
			t.Fatalf("error of %d bytes", len(r.body))
		}
	})
}

// TestDocumentedBounds: the API document states the bounds of api/limits.go, which
// the server enforces; the two must not drift apart.
func TestDocumentedBounds(t *testing.T) {
	doc, err := httpapi.GetSwagger()
	if err != nil {
		t.Fatal(err)
	}
	schemas := doc.Components.Schemas
	prop := func(schema, field string) (minimum, maximum *float64, maxLength *uint64) {
		t.Helper()
		s, ok := schemas[schema]
		if !ok || s.Value == nil {
			t.Fatalf("no schema %s", schema)
		}
		p, ok := s.Value.Properties[field]
		if !ok || p.Value == nil {
			t.Fatalf("no property %s.%s", schema, field)
		}
		return p.Value.Min, p.Value.Max, p.Value.MaxLength
	}
	for _, c := range []struct {
		schema, field string
		max           float64
	}{
		{"Resources", "cpu", api.MaxCPU},
		{"Resources", "memoryMiB", api.MaxMemoryMiB},
		{"Resources", "diskGiB", api.MaxDiskGiB},
		{"ProjectQuota", "sandboxes", api.MaxQuotaSandboxes},
		{"ProjectQuota", "cpu", api.MaxQuotaCPU},
		{"ProjectQuota", "memoryMiB", api.MaxQuotaMemoryMiB},
		{"ProjectQuota", "diskGiB", api.MaxQuotaDiskGiB},
		{"SandboxCreate", "ttlSeconds", api.MaxTTLSeconds},
		{"SandboxPatch", "ttlSeconds", api.MaxTTLSeconds},
		{"ForkRequest", "ttlSeconds", api.MaxTTLSeconds},
		{"ProfileSpec", "ttlSeconds", api.MaxTTLSeconds},
	} {
		minimum, maximum, _ := prop(c.schema, c.field)
		if minimum == nil || *minimum != 0 || maximum == nil || *maximum != c.max {
			t.Errorf("%s.%s: minimum %v, maximum %v; want 0 and %v", c.schema, c.field, minimum, maximum, c.max)
		}
	}
	for _, schema := range []string{"SandboxCreate", "ProfileSpec"} {
		if _, _, n := prop(schema, "template"); n == nil || *n != api.MaxTemplateBytes {
			t.Errorf("%s.template: maxLength %v, want %d", schema, n, api.MaxTemplateBytes)
		}
	}
	if p := schemas["SandboxCreate"].Value.Properties["initCommands"].Value; p.MaxItems == nil || *p.MaxItems != api.MaxInitCommands ||
		p.Items.Value.MaxLength == nil || *p.Items.Value.MaxLength != api.MaxInitCommandBytes {
		t.Errorf("SandboxCreate.initCommands: maxItems %v, items' maxLength %v; want %d and %d",
			p.MaxItems, p.Items.Value.MaxLength, api.MaxInitCommands, api.MaxInitCommandBytes)
	}
}

// TestInitCommands: a create records its init commands, within bounds, and every
// read returns them; a sandbox created without them has none to return.
func TestInitCommands(t *testing.T) {
	forEachStore(t, func(t *testing.T, st store.Store) {
		e := newEnv(t, st)
		pl := map[string]any{"allowedPools": []string{"fake"}}
		var got httpapi.Sandbox
		cmds := []string{"make deps", `echo "$GREETING" > init.txt`}
		e.do(e.admin, "POST", "/v1/sandboxes", map[string]any{"placement": pl, "initCommands": cmds}).
			want(t, http.StatusAccepted).decode(t, &got)
		var read httpapi.Sandbox
		e.do(e.admin, "GET", "/v1/sandboxes/"+got.Id, nil).want(t, http.StatusOK).decode(t, &read)
		if !reflect.DeepEqual(deref(read.InitCommands), cmds) || !reflect.DeepEqual(deref(got.InitCommands), cmds) {
			t.Fatalf("init commands: created %v, read %v; want %v", got.InitCommands, read.InitCommands, cmds)
		}
		e.do(e.admin, "POST", "/v1/sandboxes", map[string]any{"placement": pl}).
			want(t, http.StatusAccepted).decode(t, &got)
		if got.InitCommands != nil {
			t.Fatalf("init commands of a create without: %v", *got.InitCommands)
		}
		wantField(t, e.do(e.admin, "POST", "/v1/sandboxes", map[string]any{"placement": pl,
			"initCommands": make([]string, api.MaxInitCommands+1)}), "initCommands")
		wantField(t, e.do(e.admin, "POST", "/v1/sandboxes", map[string]any{"placement": pl,
			"initCommands": []string{strings.Repeat("x", api.MaxInitCommandBytes+1)}}), "initCommands")
	})
}

// usageFails is a store whose usage sums fail.
type usageFails struct{ store.Store }

func (usageFails) ProjectUsage(context.Context, string, string) (store.Usage, error) {
	return store.Usage{}, errors.New("usage unavailable")
}

// TestQuotaPutAllOrNothing: a quota update whose answer cannot be made stores
// nothing, rather than putting the quota in force and answering an error.
func TestQuotaPutAllOrNothing(t *testing.T) {
	forEachStore(t, func(t *testing.T, st store.Store) {
		e := newEnvWith(t, st, func(o *httpapi.Options) { o.Store = usageFails{st} })
		e.do(e.admin, "PUT", "/v1/admin/projects/acme/ci", map[string]any{"quota": map[string]any{"sandboxes": 1}}).
			want(t, http.StatusInternalServerError, api.CodeInternal)
		if _, err := st.GetProject(context.Background(), "acme", "ci"); !api.IsCode(err, api.CodeNotFound) {
			t.Fatalf("the failed put stored the project: %v", err)
		}
	})
}

// TestStoredPolicyTTLAboveTheBound: a policy stored before the bound with a longer
// defaults.ttlSeconds still lets creates through, held to the bound.
func TestStoredPolicyTTLAboveTheBound(t *testing.T) {
	forEachStore(t, func(t *testing.T, st store.Store) {
		e := newEnv(t, st)
		if err := st.PutPolicy(context.Background(), store.Policy{Defaults: map[string]any{"ttlSeconds": float64(20 * 365 * 24 * 3600)}}); err != nil {
			t.Fatal(err)
		}
		sb := e.createSandbox(e.admin, "fake", nil)
		if sb.TtlSeconds == nil || *sb.TtlSeconds != api.MaxTTLSeconds {
			t.Fatalf("ttlSeconds %v, want %d", sb.TtlSeconds, api.MaxTTLSeconds)
		}
	})
}

// TestPlacementBound: a create's placement names pools that could exist and regions of
// bounded length, and a refusal quotes no more than a name could hold.
func TestPlacementBound(t *testing.T) {
	forEachStore(t, func(t *testing.T, st store.Store) {
		e := newEnv(t, st)
		for _, pl := range []map[string]any{
			{"allowedPools": []string{strings.Repeat("p", 100000)}},
			{"regions": []string{strings.Repeat("r", api.MaxRegionBytes+1)}},
		} {
			r := e.do(e.admin, "POST", "/v1/sandboxes", map[string]any{"placement": pl})
			wantField(t, r, "placement.")
			if len(r.body) > 2000 {
				t.Fatalf("error of %d bytes", len(r.body))
			}
		}
	})
}
