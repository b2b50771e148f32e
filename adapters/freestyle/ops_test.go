package freestyle_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/adapters/freestyle"
	"github.com/different-ai/differently/api"
)

func TestExposePort(t *testing.T) {
	e := newEnv(t, freestyle.Config{Domain: "example.test"})
	inst, err := e.a.Create(t.Context(), request("sbx_ports"))
	if err != nil {
		t.Fatal(err)
	}
	want := "https://8080-" + freestyle.Slug("sbx_ports") + ".example.test/"
	for range 2 { // the second call meets the existing rule
		got, err := e.a.ExposePort(t.Context(), inst.Ref, 8080)
		if err != nil || got != want {
			t.Fatalf("expose: %q, %v; want %q", got, err, want)
		}
	}
	rules := e.fake.TLSRules()
	if len(rules) != 1 || !rules[0].Source.Public || rules[0].Destination.VMID != inst.Ref || rules[0].Destination.Port != 8080 {
		t.Fatalf("rules %+v", rules)
	}
	if _, err := e.a.ExposePort(t.Context(), inst.Ref, 70000); !api.IsCode(err, api.CodeInvalidRequest) {
		t.Fatalf("port 70000: %v", err)
	}
}

// TestExposePortMeetsAnotherRule: a rule for the hostname that routes to another VM
// (left behind by an earlier VM of the same slug) is not taken for this VM's: the
// caller would be handed a URL that reaches somebody else's machine.
func TestExposePortMeetsAnotherRule(t *testing.T) {
	e := newEnv(t, freestyle.Config{Domain: "example.test"})
	other, err := e.a.Create(t.Context(), request("sbx_other"))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(map[string]any{"action": "allow", "domain": "8080-" + freestyle.Slug("sbx_mine") + ".example.test",
		"source": map[string]any{"public": true}, "destination": map[string]any{"vmId": other.Ref, "port": 8080}})
	rawPost(t, e, "/v5/tls", body)
	mine, err := e.a.Create(t.Context(), request("sbx_mine"))
	if err != nil {
		t.Fatal(err)
	}
	if url, err := e.a.ExposePort(t.Context(), mine.Ref, 8080); !api.IsCode(err, api.CodeInvalidState) {
		t.Fatalf("expose over another VM's rule: %q, %v; want invalid_state", url, err)
	}
}

// TestDeleteRemovesRoutes: a VM's public routes go before the VM, whether or not
// Freestyle would have removed them itself.
func TestDeleteRemovesRoutes(t *testing.T) {
	e := newEnv(t, freestyle.Config{Domain: "example.test"})
	e.fake.KeepTLSRules = true
	keep, err := e.a.Create(t.Context(), request("sbx_keep"))
	if err != nil {
		t.Fatal(err)
	}
	gone, err := e.a.Create(t.Context(), request("sbx_gone"))
	if err != nil {
		t.Fatal(err)
	}
	for _, ref := range []string{keep.Ref, gone.Ref} {
		for _, port := range []int{8080, 9090} {
			if _, err := e.a.ExposePort(t.Context(), ref, port); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := e.a.Delete(t.Context(), gone.Ref); err != nil {
		t.Fatal(err)
	}
	rules := e.fake.TLSRules()
	if len(rules) != 2 || rules[0].Destination.VMID != keep.Ref || rules[1].Destination.VMID != keep.Ref {
		t.Fatalf("rules after deleting %s: %+v, want only %s's two", gone.Ref, rules, keep.Ref)
	}
}

// TestDeleteWhenRoutesCannotBeListed: the VM goes whatever the TLS listing answers,
// and no answer of the listing passes for the VM's (a not_found would have the
// caller take a running VM for gone).
func TestDeleteWhenRoutesCannotBeListed(t *testing.T) {
	for _, status := range []int{http.StatusNotFound, http.StatusForbidden, http.StatusInternalServerError} {
		e := newEnv(t, freestyle.Config{})
		inst, err := e.a.Create(t.Context(), request("sbx_tls"))
		if err != nil {
			t.Fatal(err)
		}
		e.fake.SetIntercept(func(w http.ResponseWriter, r *http.Request) bool {
			if r.Method == http.MethodGet && r.URL.Path == "/v5/tls" {
				w.WriteHeader(status)
				return true
			}
			return false
		})
		if err := e.a.Delete(t.Context(), inst.Ref); err != nil {
			t.Errorf("listing answered %d: delete: %v", status, err)
		}
		if vms := e.fake.VMs(); len(vms) != 0 {
			t.Errorf("listing answered %d: %d VMs left", status, len(vms))
		}
	}
}

func TestRenewTTL(t *testing.T) {
	e := newEnv(t, freestyle.Config{})
	req := request("sbx_ttl")
	req.TTLSeconds = 60
	inst, err := e.a.Create(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.a.RenewTTL(t.Context(), inst.Ref, 3600); err != nil {
		t.Fatal(err)
	}
	// The VM's age is added, so the expiry is never earlier than asked.
	if ttl := e.fake.VMs()[0].TTLSeconds; ttl == nil || *ttl < 3600 || *ttl > 3700 {
		t.Fatalf("ttl after renewal %v", ttl)
	}
	if err := e.a.RenewTTL(t.Context(), inst.Ref, 0); err != nil {
		t.Fatal(err)
	}
	if ttl := e.fake.VMs()[0].TTLSeconds; ttl != nil {
		t.Fatalf("ttl after removal %v, want none", *ttl)
	}
	if err := e.a.RenewTTL(t.Context(), "vm-missing", 5); !api.IsCode(err, api.CodeNotFound) {
		t.Fatalf("renew of a missing VM: %v", err)
	}
}

func TestSnapshotIsMemory(t *testing.T) {
	e := newEnv(t, freestyle.Config{})
	inst, err := e.a.Create(t.Context(), request("sbx_snap"))
	if err != nil {
		t.Fatal(err)
	}
	snap, err := e.a.Snapshot(t.Context(), inst.Ref, adapters.SnapshotDisk)
	if err != nil || snap.Kind != adapters.SnapshotMemory || snap.Ref == "" {
		t.Fatalf("disk snapshot: %+v, %v; want kind memory", snap, err)
	}
	// A restored VM gets the new sandbox's env, not its source's.
	req := request("sbx_restored")
	req.FromSnapshot = snap.Ref
	req.Env = map[string]string{"OTHER": "x"}
	restored, err := e.a.Create(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	res, err := e.a.Exec(t.Context(), restored.Ref, api.ExecRequest{Command: `printf '%s|%s' "$GREETING" "$OTHER"`})
	if err != nil || res.Stdout != "|x" {
		t.Fatalf("env of a restored VM: %+v, %v", res, err)
	}
}
