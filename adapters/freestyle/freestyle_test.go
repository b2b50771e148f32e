package freestyle_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/adapters/conformance"
	"github.com/different-ai/differently/adapters/freestyle"
	"github.com/different-ai/differently/adapters/freestyle/freestylefake"
	"github.com/different-ai/differently/api"
)

const testKey = "fs-test-key-7d1c9e"

type env struct {
	fake *freestylefake.Server
	srv  *httptest.Server
	a    *freestyle.Adapter
}

func newEnv(t *testing.T, cfg freestyle.Config, opts ...freestyle.Option) *env {
	t.Helper()
	fake, err := freestylefake.New(testKey)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(fake)
	t.Cleanup(func() {
		srv.Close()
		_ = fake.Close()
	})
	cfg.APIURL = srv.URL
	opts = append([]freestyle.Option{freestyle.WithHTTPClient(srv.Client()), freestyle.WithPollInterval(time.Millisecond)}, opts...)
	a, err := freestyle.New(cfg, testKey, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return &env{fake: fake, srv: srv, a: a}
}

func request(id string) adapters.CreateRequest {
	return adapters.CreateRequest{ID: id, Installation: "inst_test", Env: map[string]string{"GREETING": "it's here"},
		Labels: adapters.OwnershipLabels(map[string]string{"team": "a"}, id, "inst_test")}
}

func TestConformance(t *testing.T) {
	e := newEnv(t, freestyle.Config{})
	conformance.Test(t, e.a, conformance.Options{WorkDir: "/tmp", CheckTimeout: 30 * time.Second})
}

func TestSlug(t *testing.T) {
	long := "sbx_" + strings.Repeat("X", 100)
	for _, id := range []string{"sbx_01HZY3K4V5W6X7Y8Z9A0B1C2D3", "A_b.c", long, "a"} {
		s := freestyle.Slug(id)
		if s != freestyle.Slug(id) {
			t.Fatalf("slug of %q is not deterministic", id)
		}
		if len(s) > 57 || strings.Trim(s, "abcdefghijklmnopqrstuvwxyz0123456789-") != "" {
			t.Fatalf("slug %q of %q is not 1-57 of [a-z0-9-]", s, id)
		}
	}
	if freestyle.Slug("sbx_A") == freestyle.Slug("sbx_a") || freestyle.Slug("a_b") == freestyle.Slug("a-b") {
		t.Fatal("IDs differing in case or punctuation share a slug")
	}
	if got := freestyle.Slug("sbx_01ABC"); !strings.HasPrefix(got, "dly-sbx-01abc-") {
		t.Fatalf("slug %q does not keep the readable ID", got)
	}
}

func TestParseConfig(t *testing.T) {
	c, err := freestyle.ParseConfig(nil)
	if err != nil || c.APIURL != freestyle.DefaultAPIURL || c.Domain != "style.dev" || c.Egress != "none" || c.Snapshot != "" {
		t.Fatalf("defaults: %+v, %v", c, err)
	}
	c, err = freestyle.ParseConfig(map[string]any{"apiURL": "http://x", "snapshot": "sn1", "egress": "public", "domain": "example.com"})
	if err != nil || c.APIURL != "http://x" || c.Snapshot != "sn1" || c.Egress != "public" || c.Domain != "example.com" {
		t.Fatalf("set: %+v, %v", c, err)
	}
	// apiURL: "" asked for the default before URLs were checked, and still does.
	for _, v := range []string{"", " "} {
		if c, err := freestyle.ParseConfig(map[string]any{"apiURL": v}); err != nil || c.APIURL != freestyle.DefaultAPIURL {
			t.Errorf("apiURL %q: %+v, %v; want the default URL", v, c, err)
		}
	}
	for key, v := range map[string]any{"region": "x", "egress": "some", "snapshot": 3, "domain": "a/b"} {
		_, err := freestyle.ParseConfig(map[string]any{key: v})
		if e := api.AsError(err); e == nil || e.Code != api.CodeInvalidRequest || e.Details["key"] != key {
			t.Fatalf("%s=%v: %v, want invalid_request naming the key", key, v, err)
		}
	}
	if _, err := freestyle.New(freestyle.Config{APIURL: "ftp://x"}, "k"); !api.IsCode(err, api.CodeInvalidRequest) {
		t.Fatalf("bad apiURL: %v", err)
	}
	if _, err := freestyle.New(freestyle.Config{}, ""); !api.IsCode(err, api.CodeInvalidRequest) {
		t.Fatalf("no key: %v", err)
	}
}

func TestCreateShapesTheVM(t *testing.T) {
	e := newEnv(t, freestyle.Config{Snapshot: "base"})
	ctx := t.Context()
	// The fake has no snapshot "base": a missing base is the operator's mistake.
	if _, err := e.a.Create(ctx, request("sbx_nobase")); !api.IsCode(err, api.CodeInvalidRequest) {
		t.Fatalf("create from a missing base snapshot: %v, want invalid_request", err)
	}
	e2 := newEnv(t, freestyle.Config{})
	req := request("sbx_shape")
	req.TTLSeconds = 600
	req.Resources = adapters.Resources{CPU: 3.5, MemoryMiB: 2048, DiskGiB: 32}
	req.Labels["differently.dev/org"] = "org_1"
	req.Labels["too-long"] = strings.Repeat("v", 64)
	inst, err := e2.a.Create(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if inst.State != adapters.StateRunning || inst.SandboxID != req.ID {
		t.Fatalf("instance %+v", inst)
	}
	vm := e2.fake.VMs()[0]
	if vm.Slug != freestyle.Slug(req.ID) || *vm.TTLSeconds != 600 || *vm.IdleTimeout != -1 || len(vm.Firewall) != 0 {
		t.Fatalf("vm slug %q ttl %v idle %v firewall %v", vm.Slug, *vm.TTLSeconds, *vm.IdleTimeout, vm.Firewall)
	}
	want := map[string]string{"dly-installation": "inst_test", "dly-sandbox-id": req.ID, "dly-org": "org_1", "team": "a"}
	if len(vm.Metadata) != len(want) {
		t.Fatalf("metadata %v, want %v", vm.Metadata, want)
	}
	for k, v := range want {
		if vm.Metadata[k] != v {
			t.Fatalf("metadata %v, want %v", vm.Metadata, want)
		}
	}
	// CPU rounds up; memory below the default is not shrunk; disk grows to 32 GiB.
	if vm.Resources != (freestylefake.Resources{CPU: 4, Memory: 4096, Storage: 32 << 10}) {
		t.Fatalf("resources %+v", vm.Resources)
	}
	res, err := e2.a.Exec(ctx, inst.Ref, api.ExecRequest{Command: `stat -c %a /etc/differently/env; printf '%s' "$GREETING"`})
	if err != nil || res.Stdout != "600\nit's here" {
		t.Fatalf("env file: %+v, %v", res, err)
	}
	if _, err := e2.a.Create(ctx, adapters.CreateRequest{ID: "sbx_x", Installation: "i", Env: map[string]string{"A-B": "1"}}); !api.IsCode(err, api.CodeInvalidRequest) {
		t.Fatalf("env name that is no shell identifier: %v", err)
	}
	if _, err := e2.a.Create(ctx, adapters.CreateRequest{ID: "sbx_x", Installation: "i", Resources: adapters.Resources{CPU: 33}}); !api.IsCode(err, api.CodeInvalidRequest) {
		t.Fatalf("over the CPU limit: %v", err)
	}
}

func TestPublicEgress(t *testing.T) {
	e := newEnv(t, freestyle.Config{Egress: "public"})
	if _, err := e.a.Create(t.Context(), request("sbx_pub")); err != nil {
		t.Fatal(err)
	}
	if fw := e.fake.VMs()[0].Firewall; len(fw) != 2 || fw[0].Action != "allow" {
		t.Fatalf("firewall %v, want allow-all", fw)
	}
	// Egress control is declared only by a pool that closes the firewall.
	for egress, want := range map[string]bool{"public": false, "none": true, "": true} {
		a, err := freestyle.New(freestyle.Config{APIURL: "http://127.0.0.1:1", Egress: egress}, "key")
		if err != nil {
			t.Fatal(err)
		}
		caps, err := a.Capabilities(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if got := slices.Contains(caps.Features, adapters.FeatureEgressControl); got != want {
			t.Errorf("egress %q: network.egress-control declared %v, want %v", egress, got, want)
		}
	}
}

// TestCreateAfterDroppedResponse: the VM is made but the answer never arrives; the
// retry finds it through the slug's 409.
func TestCreateAfterDroppedResponse(t *testing.T) {
	e := newEnv(t, freestyle.Config{})
	dropped := false
	e.fake.SetIntercept(func(w http.ResponseWriter, r *http.Request) bool {
		if r.Method != http.MethodPost || r.URL.Path != "/v5/vms" || dropped {
			return false
		}
		dropped = true
		e.fake.Handle(httptest.NewRecorder(), r)
		w.WriteHeader(http.StatusBadGateway)
		return true
	})
	req := request("sbx_dropped")
	if _, err := e.a.Create(t.Context(), req); !api.IsCode(err, api.CodeProviderUnavailable) {
		t.Fatalf("first create: %v, want provider_unavailable", err)
	}
	inst, err := e.a.Create(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	if vms := e.fake.VMs(); len(vms) != 1 || vms[0].ID != inst.Ref || inst.State != adapters.StateRunning {
		t.Fatalf("after retry: %d VMs, instance %+v", len(vms), inst)
	}
	// The retry finished what the lost attempt never did: the env file.
	res, err := e.a.Exec(t.Context(), inst.Ref, api.ExecRequest{Command: `printf '%s' "$GREETING"`})
	if err != nil || res.Stdout != "it's here" {
		t.Fatalf("env after retry: %+v, %v", res, err)
	}
}

// TestSlugOfAnotherSandbox: a 409 whose VM belongs to another sandbox is not adopted.
func TestSlugOfAnotherSandbox(t *testing.T) {
	e := newEnv(t, freestyle.Config{})
	body, _ := json.Marshal(map[string]any{"slug": freestyle.Slug("sbx_mine"), "metadata": map[string]string{"dly-sandbox-id": "sbx_other"},
		"firewall": map[string]any{"rules": []any{}}})
	rawPost(t, e, "/v5/vms", body)
	if _, err := e.a.Create(t.Context(), request("sbx_mine")); !api.IsCode(err, api.CodeInvalidRequest) {
		t.Fatalf("create: %v, want invalid_request", err)
	}
}

func rawPost(t *testing.T, e *env, path string, body []byte) {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, e.srv.URL+path, bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+testKey)
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST %s: %d", path, resp.StatusCode)
	}
}

func TestHealthAndCapacity(t *testing.T) {
	e := newEnv(t, freestyle.Config{})
	if err := e.a.Health(t.Context()); err != nil {
		t.Fatal(err)
	}
	if c, err := e.a.Capacity(t.Context()); err != nil || c.Bounded {
		t.Fatalf("capacity %+v, %v", c, err)
	}
	caps, _ := e.a.Capabilities(t.Context())
	if caps.MaxCPU != 32 || caps.MaxMemoryMiB != 64<<10 || caps.MaxDiskGiB != 256 {
		t.Fatalf("limits %+v", caps)
	}
	if info := e.a.Info(); info.Trust != api.TrustExternal {
		t.Fatalf("trust %q", info.Trust)
	}
}
