package opensandbox

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/adapters/conformance"
	"github.com/different-ai/differently/adapters/opensandbox/ossfake"
	"github.com/different-ai/differently/api"
)

const testKey = "osk-very-secret-test-key"

// newAdapter starts a fake server and an adapter on it. extra config keys are added
// to apiURL and image.
func newAdapter(t *testing.T, extra map[string]any) (*Adapter, *ossfake.Server) {
	t.Helper()
	srv := ossfake.New(t, testKey)
	cfg := map[string]any{"apiURL": srv.URL(), "image": "ubuntu:24.04"}
	for k, v := range extra {
		cfg[k] = v
	}
	a, err := FromConfig(cfg, testKey, WithPollInterval(time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	return a, srv
}

func request(id, installation string) adapters.CreateRequest {
	return adapters.CreateRequest{ID: id, Installation: installation,
		Labels: adapters.OwnershipLabels(map[string]string{"team": "infra"}, id, installation)}
}

func TestConformanceDocker(t *testing.T) {
	a, _ := newAdapter(t, map[string]any{"runtime": "docker", "ports": "signed"})
	// The fake runs every sandbox in its own host directory: relative paths are the
	// honest work directory.
	conformance.Test(t, a, conformance.Options{})
}

func TestConformanceKubernetesThroughProxy(t *testing.T) {
	a, srv := newAdapter(t, map[string]any{"runtime": "kubernetes", "useServerProxy": true, "egress": "none"})
	srv.SetFaults(ossfake.Faults{SSE: true, PendingPolls: 3})
	conformance.Test(t, a, conformance.Options{})
}

func TestConformanceNoRuntime(t *testing.T) {
	a, _ := newAdapter(t, nil)
	conformance.Test(t, a, conformance.Options{})
}

func TestCredentialsNeverInMessages(t *testing.T) {
	srv := ossfake.New(t, "the-right-key")
	a, err := New(Config{APIURL: srv.URL(), Image: "x", Isolation: "container", LineEndings: "lf",
		Egress: "public", Ports: "none", PortScheme: "http"}, testKey, WithPollInterval(time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	err = a.Health(t.Context())
	if !api.IsCode(err, api.CodeProviderUnavailable) || strings.Contains(err.Error(), testKey) {
		t.Fatalf("health with a wrong key: %v", err)
	}
	for _, status := range []int{http.StatusForbidden, http.StatusInternalServerError, http.StatusBadRequest} {
		a2, srv2 := newAdapter(t, nil)
		srv2.SetFaults(ossfake.Faults{Status: func(*http.Request) int { return status }})
		_, err := a2.Get(t.Context(), "osb-0001")
		if err == nil || strings.Contains(err.Error(), testKey) {
			t.Fatalf("status %d: %v", status, err)
		}
	}
}

func TestStatusMapping(t *testing.T) {
	cases := []struct {
		status int
		code   api.Code
	}{
		{http.StatusUnauthorized, api.CodeProviderUnavailable},
		{http.StatusForbidden, api.CodeProviderUnavailable},
		{http.StatusNotFound, api.CodeNotFound},
		{http.StatusConflict, api.CodeInvalidState},
		{http.StatusTooManyRequests, api.CodeInsufficientCapacity},
		{http.StatusBadGateway, api.CodeProviderUnavailable},
		{http.StatusInternalServerError, api.CodeProviderUnavailable},
	}
	for _, tc := range cases {
		a, srv := newAdapter(t, nil)
		srv.SetFaults(ossfake.Faults{Status: func(r *http.Request) int {
			if r.Method == http.MethodPost {
				return tc.status
			}
			return 0
		}})
		_, err := a.Create(t.Context(), request("sbx_status", "inst_a"))
		if !api.IsCode(err, tc.code) {
			t.Errorf("create answered %d: got %v, want %s", tc.status, err, tc.code)
		}
		if err != nil && strings.Contains(err.Error(), testKey) {
			t.Errorf("status %d: message holds the key: %v", tc.status, err)
		}
	}
}

func TestDeleteMissingAndConflict(t *testing.T) {
	a, srv := newAdapter(t, nil)
	if err := a.Delete(t.Context(), "osb-9999"); err != nil {
		t.Fatalf("delete of a missing sandbox: %v", err)
	}
	inst, err := a.Create(t.Context(), request("sbx_del", "inst_a"))
	if err != nil {
		t.Fatal(err)
	}
	srv.SetFaults(ossfake.Faults{Status: func(r *http.Request) int {
		if r.Method == http.MethodDelete {
			return http.StatusConflict
		}
		return 0
	}})
	if err := a.Delete(t.Context(), inst.Ref); !api.IsCode(err, api.CodeInvalidState) {
		t.Fatalf("delete answered 409 on a live sandbox: %v, want invalid_state", err)
	}
	srv.SetFaults(ossfake.Faults{})
	if err := a.Delete(t.Context(), inst.Ref); err != nil {
		t.Fatal(err)
	}
	if err := a.Delete(t.Context(), inst.Ref); err != nil {
		t.Fatalf("second delete: %v", err)
	}
}

func TestTimeoutIsProviderUnavailable(t *testing.T) {
	a, srv := newAdapter(t, nil)
	srv.SetFaults(ossfake.Faults{Block: func(*http.Request) bool { return true }})
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	err := a.Health(ctx)
	if !api.IsCode(err, api.CodeProviderUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("blocked health: %v", err)
	}
}

func TestListFailsWhenAPageFails(t *testing.T) {
	a, srv := newAdapter(t, nil)
	a.pageSize = 2
	for _, id := range []string{"sbx_1", "sbx_2", "sbx_3", "sbx_4", "sbx_5"} {
		if _, err := a.Create(t.Context(), request(id, "inst_paged")); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := a.Create(t.Context(), request("sbx_other", "inst_other")); err != nil {
		t.Fatal(err)
	}
	list, err := a.List(t.Context(), "inst_paged")
	if err != nil || len(list) != 5 {
		t.Fatalf("list over three pages: %d instances, %v", len(list), err)
	}
	srv.SetFaults(ossfake.Faults{Status: func(r *http.Request) int {
		if r.URL.Path == "/v1/sandboxes" && r.URL.Query().Get("page") == "2" {
			return http.StatusInternalServerError
		}
		return 0
	}})
	if list, err := a.List(t.Context(), "inst_paged"); err == nil || !api.IsCode(err, api.CodeProviderUnavailable) {
		t.Fatalf("list with a failing page 2 returned %d instances, %v; want the whole call to fail", len(list), err)
	}
}

func TestListSkipsDeletedAndRechecksMetadata(t *testing.T) {
	a, _ := newAdapter(t, nil)
	keep, err := a.Create(t.Context(), request("sbx_keep", "inst_x"))
	if err != nil {
		t.Fatal(err)
	}
	gone, err := a.Create(t.Context(), request("sbx_gone", "inst_x"))
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Delete(t.Context(), gone.Ref); err != nil {
		t.Fatal(err)
	}
	list, err := a.List(t.Context(), "inst_x")
	if err != nil || len(list) != 1 || list[0].Ref != keep.Ref || list[0].SandboxID != "sbx_keep" {
		t.Fatalf("list: %+v, %v", list, err)
	}
}

func TestCreateAfterDroppedResponse(t *testing.T) {
	a, srv := newAdapter(t, nil)
	srv.SetFaults(ossfake.Faults{DropCreate: 1})
	req := request("sbx_dropped", "inst_d")
	if _, err := a.Create(t.Context(), req); !api.IsCode(err, api.CodeProviderUnavailable) {
		t.Fatalf("create with a dropped answer: %v, want provider_unavailable", err)
	}
	inst, err := a.Create(t.Context(), req)
	if err != nil || inst.State != adapters.StateRunning || inst.SandboxID != req.ID {
		t.Fatalf("retry: %+v, %v", inst, err)
	}
	if n := srv.Live(MetaSandboxID, req.ID); n != 1 {
		t.Fatalf("%d sandboxes for one id, want 1", n)
	}
	if n := len(srv.Creates()); n != 1 {
		t.Fatalf("%d create calls, want 1", n)
	}
}

func TestCreateFailedSandbox(t *testing.T) {
	a, _ := newAdapter(t, nil)
	req := request("sbx_fail", "inst_f")
	req.Template = "fail/broken:latest"
	_, err := a.Create(t.Context(), req)
	if !api.IsCode(err, api.CodeSandboxFailed) || !strings.Contains(err.Error(), "image pull failed") {
		t.Fatalf("create of a failing image: %v", err)
	}
}

func TestCreateWaitIsBoundedByCallerOnly(t *testing.T) {
	a, srv := newAdapter(t, nil)
	// The polls are held until the caller gives up, so the deadline passes in the
	// wait whatever the machine's speed.
	srv.SetFaults(ossfake.Faults{PendingPolls: 1 << 30, Block: func(r *http.Request) bool {
		return r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/v1/sandboxes/")
	}})
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	_, err := a.Create(ctx, request("sbx_slow", "inst_s"))
	// OpenSandbox kept answering Pending: this sandbox did not start in the time it
	// had, and the pool is not to blame (sandbox_failed, not provider_unavailable).
	if !api.IsCode(err, api.CodeSandboxFailed) || !strings.Contains(err.Error(), "when the wait ended") {
		t.Fatalf("create past the caller's deadline: %v, want sandbox_failed", err)
	}
}

func TestCreateBody(t *testing.T) {
	a, srv := newAdapter(t, map[string]any{"templateId": "python", "image": "python:3.12", "egress": "allowlist",
		"egressAllow": []any{"pypi.org"}})
	req := request("sbx_body", "inst_b")
	req.Resources = adapters.Resources{CPU: 1.5, MemoryMiB: 2048, DiskGiB: 10}
	req.TTLSeconds = 5
	req.Env = map[string]string{"A": "1"}
	req.Labels["differently.dev/org"] = "org_1"
	req.Labels["bad label"] = "x"
	req.Template = "node"
	if _, err := a.Create(t.Context(), req); !api.IsCode(err, api.CodeInvalidRequest) || !strings.Contains(err.Error(), "python") {
		t.Fatalf("create for another template: %v", err)
	}
	req.Template = "python"
	if _, err := a.Create(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	body := srv.Creates()[0]
	meta := body["metadata"].(map[string]any)
	limits := body["resourceLimits"].(map[string]any)
	switch {
	case body["image"].(map[string]any)["uri"] != "python:3.12":
		t.Errorf("image %v", body["image"])
	case limits["cpu"] != "1500m" || limits["memory"] != "2048Mi" || limits["ephemeral-storage"] != "10Gi" || len(limits) != 3:
		t.Errorf("resourceLimits %v", limits)
	case body["timeout"].(interface{ String() string }).String() != "60":
		t.Errorf("timeout %v, want the 60 s minimum", body["timeout"])
	case meta[MetaSandboxID] != "sbx_body" || meta[MetaInstallation] != "inst_b" || meta["differently.dev/org"] != "org_1" ||
		meta["team"] != "infra" || meta["bad label"] != nil:
		t.Errorf("metadata %v", meta)
	case body["networkPolicy"] == nil:
		t.Errorf("no network policy with egress allowlist")
	}
}

// TestDiskResource: diskGiB goes to OpenSandbox as the Kubernetes resource
// ephemeral-storage, which the Kubernetes runtime applies to the pod; a pool on the
// Docker runtime, which has no disk limit, does not send it and says so in Info.
func TestDiskResource(t *testing.T) {
	for _, tc := range []struct {
		runtime string
		want    string // the ephemeral-storage limit sent, "" for none
	}{
		{"kubernetes", "10Gi"},
		{"", "10Gi"},
		{"docker", ""},
	} {
		cfg := map[string]any{"image": "ubuntu:24.04"}
		if tc.runtime != "" {
			cfg["runtime"] = tc.runtime
		}
		a, srv := newAdapter(t, cfg)
		req := request("sbx_disk_"+tc.runtime+"x", "inst_d")
		req.Resources = adapters.Resources{CPU: 1, MemoryMiB: 512, DiskGiB: 10}
		if _, err := a.Create(t.Context(), req); err != nil {
			t.Fatalf("runtime %q: %v", tc.runtime, err)
		}
		noDisk := request("sbx_nodisk_"+tc.runtime+"x", "inst_d")
		noDisk.Resources = adapters.Resources{CPU: 1, MemoryMiB: 512}
		if _, err := a.Create(t.Context(), noDisk); err != nil {
			t.Fatalf("runtime %q: %v", tc.runtime, err)
		}
		creates := srv.Creates()
		limits := creates[0]["resourceLimits"].(map[string]any)
		if got, _ := limits["ephemeral-storage"].(string); got != tc.want {
			t.Errorf("runtime %q: ephemeral-storage %q, want %q (limits %v)", tc.runtime, got, tc.want, limits)
		}
		if _, ok := creates[1]["resourceLimits"].(map[string]any)["ephemeral-storage"]; ok {
			t.Errorf("runtime %q: a request without diskGiB sent a disk limit", tc.runtime)
		}
		desc := a.Info().Description
		if sent := strings.Contains(desc, "diskGiB is sent as resourceLimits ephemeral-storage"); sent != (tc.want != "") ||
			(tc.want == "" && !strings.Contains(desc, "diskGiB is not applied")) {
			t.Errorf("runtime %q: Info says %q", tc.runtime, desc)
		}
	}
}

func TestRenewTTL(t *testing.T) {
	a, srv := newAdapter(t, nil)
	req := request("sbx_ttl", "inst_t")
	req.TTLSeconds = 120
	inst, err := a.Create(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	before := srv.ExpiresAt(inst.Ref)
	if err := a.RenewTTL(t.Context(), inst.Ref, 3600); err != nil {
		t.Fatal(err)
	}
	after := srv.ExpiresAt(inst.Ref)
	if after.Sub(before) < 50*time.Minute {
		t.Fatalf("expiry moved from %v to %v, want about an hour later", before, after)
	}
	if err := a.RenewTTL(t.Context(), inst.Ref, 60); err != nil || !srv.ExpiresAt(inst.Ref).Equal(after) {
		t.Fatalf("a shorter ttl must leave the later backstop: %v", err)
	}
	if err := a.RenewTTL(t.Context(), "osb-9999", 60); !api.IsCode(err, api.CodeNotFound) {
		t.Fatalf("renew of a missing sandbox: %v", err)
	}
	// An earlier expiry is refused by the published API, so none is asked for.
	if err := a.RenewTTL(t.Context(), inst.Ref, 120); err != nil || !srv.ExpiresAt(inst.Ref).Equal(after) {
		t.Fatalf("a shorter ttl: %v, expiry %v, want %v kept", err, srv.ExpiresAt(inst.Ref), after)
	}
	// A sandbox created without a TTL has no backend expiry to move, and gets none.
	forever, err := a.Create(t.Context(), request("sbx_forever", "inst_t"))
	if err != nil {
		t.Fatal(err)
	}
	if err := a.RenewTTL(t.Context(), forever.Ref, 60); err != nil || !srv.ExpiresAt(forever.Ref).IsZero() {
		t.Fatalf("renew of a sandbox without expiry: %v, expiry %v", err, srv.ExpiresAt(forever.Ref))
	}
	// No expiry at all cannot be had once there is one: refused, the backstop kept.
	if err := a.RenewTTL(t.Context(), inst.Ref, 0); !api.IsCode(err, api.CodeUnsupportedOperation) || !srv.ExpiresAt(inst.Ref).Equal(after) {
		t.Fatalf("renew to no expiry: %v, expiry %v", err, srv.ExpiresAt(inst.Ref))
	}
}

func TestCapabilitiesFollowConfig(t *testing.T) {
	a, _ := newAdapter(t, map[string]any{"runtime": "kubernetes", "templateId": "t", "isolation": "microvm",
		"features": []any{"snapshots.memory", "arch.arm64"}})
	caps, _ := a.Capabilities(t.Context())
	got := strings.Join(caps.Features, ",")
	for _, want := range []string{"lifecycle.stop-start", "persistence.disk", "isolation.microvm", "snapshots.memory", "arch.arm64", "fork"} {
		if !strings.Contains(got, want) {
			t.Errorf("features %s lack %s", got, want)
		}
	}
	for _, not := range []string{"lifecycle.pause-resume", "ports.expose", "network.egress-control", "isolation.container"} {
		if strings.Contains(got, not) {
			t.Errorf("features %s declare %s", got, not)
		}
	}
	if len(caps.Templates) != 1 || caps.Templates[0] != "t" {
		t.Errorf("templates %v", caps.Templates)
	}
	if info := a.Info(); info.Kind != Kind || info.Trust != api.TrustPrivate || !strings.Contains(info.Isolation, "microVM") {
		t.Errorf("info %+v", info)
	}
}
