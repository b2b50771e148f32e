package freestyle_test

import (
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
