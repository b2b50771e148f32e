package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/different-ai/differently/client"
)

// The admin commands, their JSON parsed, and what a project token may not do.
func TestAdminCommands(t *testing.T) {
	dd := startDaemon(t)
	c := dd.cli(t)

	nPools := len(dd.devPools(t))
	var pools struct{ Items []client.Pool }
	c.json(&pools, "pools", "ls")
	if len(pools.Items) != nPools || pools.Items[0].Name != "devhost" || !deref(pools.Items[0].Healthy) {
		t.Errorf("pools ls: %+v", pools.Items)
	}
	var pool client.Pool
	c.json(&pool, "pools", "get", "fake")
	if pool.Name != "fake" || pool.Adapter != "fake" || len(deref(pool.EffectiveFeatures)) == 0 {
		t.Errorf("pools get: %+v", pool)
	}
	if r := c.ok("pools", "get", "fake"); !strings.Contains(r.stdout, "healthy") || !strings.Contains(r.stdout, "lifecycle.pause-resume") {
		t.Errorf("pools get as a table:\n%s", r.stdout)
	}
	if r := c.ok("pools", "ls"); !strings.Contains(r.stdout, "HEALTH") || !strings.Contains(r.stdout, "unbounded") {
		t.Errorf("pools ls as a table:\n%s", r.stdout)
	}
	c.fails(exitNotFound, []string{"404"}, "pools", "get", "nope")

	var project client.Project
	c.json(&project, "projects", "set", "acme/ci", "--sandboxes", "5", "--cpu", "8")
	if !project.Declared || deref(project.Quota.Sandboxes) != 5 || deref(project.Quota.Cpu) != 8 {
		t.Errorf("projects set: %+v", project)
	}
	c.json(&project, "projects", "get", "acme/ci")
	if project.Org != "acme" || project.Name != "ci" {
		t.Errorf("projects get: %+v", project)
	}
	var projects struct{ Items []client.Project }
	c.json(&projects, "projects", "ls")
	if len(projects.Items) == 0 {
		t.Errorf("projects ls: %+v", projects.Items)
	}
	c.ok("projects", "rm", "acme/ci")

	// A profile, and a sandbox made from it.
	var profile client.Profile
	c.json(&profile, "profiles", "set", "small", "--template", "devhost", "--pool", "devhost", "--memory", "128", "--ttl", "10m")
	if deref(profile.Template) != "devhost" || profile.Resources.MemoryMiB != 128 || profile.TtlSeconds != 600 {
		t.Errorf("profiles set: %+v", profile)
	}
	var profiles struct{ Items []client.Profile }
	c.json(&profiles, "profiles", "ls")
	if len(profiles.Items) != 1 {
		t.Errorf("profiles ls: %+v", profiles.Items)
	}
	var fromProfile client.Sandbox
	c.json(&fromProfile, "create", "--profile", "small", "--wait")
	if deref(fromProfile.Pool) != "devhost" || fromProfile.Resources.MemoryMiB != 128 {
		t.Errorf("a sandbox of profile small: %+v", fromProfile)
	}
	c.ok("rm", fromProfile.Id)
	c.json(&profile, "profiles", "get", "small")
	c.ok("profiles", "rm", "small")
	c.fails(exitNotFound, []string{"404"}, "profiles", "get", "small")

	// A project token: made here, used, listed, revoked.
	var created client.TokenCreated
	c.json(&created, "tokens", "create", "--project", "ci", "--name", "cli test")
	if created.Secret == "" || created.Token.Scope != "project" {
		t.Fatalf("tokens create: %+v", created)
	}
	if r := c.ok("tokens", "create", "--admin", "-q"); len(strings.TrimSpace(r.stdout)) < 16 || strings.Contains(strings.TrimSpace(r.stdout), "\n") {
		t.Errorf("tokens create prints %q, want the secret alone", r.stdout)
	}
	var toks struct{ Items []client.Token }
	c.json(&toks, "tokens", "ls")
	if len(toks.Items) != 3 {
		t.Errorf("tokens ls: %+v", toks.Items)
	}
	project_ := dd.cli(t, "DIFFERENTLY_TOKEN="+created.Secret)
	project_.ok("ls")
	project_.fails(exitAuth, []string{"403", "forbidden", "hint:"}, "pools", "ls")
	c.ok("tokens", "rm", created.Token.Id)
	project_.fails(exitAuth, []string{"401"}, "ls")

	// The policy, through a file.
	var policy client.Policy
	c.json(&policy, "policy", "get")
	file := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(file, []byte("allowExternal: true\nexternalPools: [fake]\ndefaults:\n  ttlSeconds: 600\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c.json(&policy, "policy", "set", "-f", file)
	if !deref(policy.AllowExternal) || len(deref(policy.ExternalPools)) != 1 {
		t.Errorf("policy set: %+v", policy)
	}
	if err := os.WriteFile(file, []byte("allowExternl: true\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c.fails(exitUsage, []string{"allowExternl"}, "policy", "set", "-f", file)

	var report client.ReconcileReport
	c.json(&report, "reconcile")
	if len(report.Pools) != nPools {
		t.Errorf("reconcile: %+v", report)
	}
	// The pass just asked for is recorded with the token that asked, beside the
	// leader's periodic ones.
	var passes struct{ Items []client.ReconcilePass }
	c.json(&passes, "reconcile", "ls", "--limit", "0")
	var asked *client.ReconcilePass
	for i, p := range passes.Items {
		if i > 0 && p.Id >= passes.Items[i-1].Id {
			t.Errorf("reconcile ls is not newest first: %+v", passes.Items)
		}
		if p.Trigger == client.OnDemand && asked == nil {
			asked = &passes.Items[i]
		}
	}
	admins := map[string]bool{}
	for _, tok := range toks.Items {
		admins[tok.Id] = tok.Scope == client.TokenScopeAdmin
	}
	if asked == nil || asked.TokenId == nil || !admins[*asked.TokenId] || len(asked.Pools) != nPools {
		t.Errorf("reconcile ls: no on-demand pass by an admin token over every pool: %+v", passes.Items)
	}
	c.json(&passes, "reconcile", "ls", "--limit", "1")
	if len(passes.Items) != 1 {
		t.Errorf("reconcile ls --limit 1: %d passes", len(passes.Items))
	}
	if r := c.ok("reconcile", "ls"); !strings.Contains(r.stdout, "ORPHANS DELETED") || !strings.Contains(r.stdout, "on_demand (tok_") {
		t.Errorf("reconcile ls as a table:\n%s", r.stdout)
	}
	c.fails(exitUsage, []string{"--limit"}, "reconcile", "ls", "--limit", "-1")
	var trust client.TrustReport
	c.json(&trust, "trust")
	if len(trust.Pools) != nPools || !trust.Pools[0].ReceivesWork {
		t.Errorf("trust: %+v", trust)
	}
	if r := c.ok("trust"); !strings.Contains(r.stdout, "RECEIVES WORK") {
		t.Errorf("trust as a table:\n%s", r.stdout)
	}
}

// Completion: the scripts for each shell, and the sandbox IDs and pool names a Tab
// asks the daemon for.
func TestCompletion(t *testing.T) {
	dd := startDaemon(t)
	c := dd.cli(t)
	var sb client.Sandbox
	c.json(&sb, "create", "--pool", "fake", "--wait")

	for _, shell := range []string{"bash", "zsh", "fish"} {
		if r := c.ok("completion", shell); !strings.Contains(r.stdout, "differently") {
			t.Errorf("completion %s: %q", shell, r.stdout[:min(200, len(r.stdout))])
		}
	}
	if r := c.ok("__complete", "get", ""); !strings.Contains(r.stdout, sb.Id+"\trunning fake") {
		t.Errorf("completing get's ID:\n%s", r.stdout)
	}
	if r := c.ok("__complete", "exec", sb.Id[:6]); !strings.Contains(r.stdout, sb.Id) {
		t.Errorf("completing exec's ID from a prefix:\n%s", r.stdout)
	}
	if r := c.ok("__complete", "cp", ""); !strings.Contains(r.stdout, sb.Id+":") {
		t.Errorf("completing cp's ID:\n%s", r.stdout)
	}
	if r := c.ok("__complete", "create", "--pool", ""); !strings.Contains(r.stdout, "devhost\tdevhost") || !strings.Contains(r.stdout, "fake\tfake") {
		t.Errorf("completing --pool:\n%s", r.stdout)
	}
	if r := c.ok("__complete", "pools", "get", "d"); !strings.Contains(r.stdout, "devhost") || strings.Contains(r.stdout, "fake") {
		t.Errorf("completing pools get:\n%s", r.stdout)
	}
	// A daemon that is down gives no suggestions, and no error.
	down := dd.cli(t, "DIFFERENTLY_ENDPOINT="+closedPort(t))
	if r := down.ok("__complete", "get", ""); strings.Contains(r.stdout, "sbx_") {
		t.Errorf("completion without a daemon:\n%s", r.stdout)
	}
}

// pools get shows a pool's warm shapes: how full each is and how it served creates.
func TestPoolsGetWarm(t *testing.T) {
	dd := startDaemon(t)
	trust := client.PoolSpecTrust("private")
	cfg := map[string]any{"templates": []string{"ubuntu"}}
	if _, err := dd.c.CreatePool(t.Context(), client.PoolSpec{Name: "warmcli", Adapter: "fake", Trust: &trust, Config: &cfg,
		Warm: &[]client.WarmShape{{Template: ptr("ubuntu"), Resources: &client.Resources{CPU: 1, MemoryMiB: 512}, Size: 2}}}); err != nil {
		t.Fatal(err)
	}
	r := dd.cli(t).ok("pools", "get", "warmcli")
	if !strings.Contains(r.stdout, "warm ubuntu 1 cpu, 512 MiB, 0 GiB") || !strings.Contains(r.stdout, "/2 ready") ||
		!strings.Contains(r.stdout, "0 hits, 0 misses") {
		t.Errorf("pools get of a warm pool:\n%s", r.stdout)
	}
}
