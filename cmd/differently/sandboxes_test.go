package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/different-ai/differently/client"
)

// Every sandbox command, its JSON parsed: create, get, ls, ttl, the lifecycle,
// snapshots, fork, cp both ways, events and rm.
func TestSandboxCommands(t *testing.T) {
	dd := startDaemon(t)
	c := dd.cli(t)

	var sb client.Sandbox
	c.json(&sb, "create", "--pool", "devhost", "--template", "devhost", "-l", "suite=cli", "-l", "who=test",
		"-e", "GREETING=hello", "--ttl", "1h", "--memory", "256", "--wait")
	if sb.State != client.Running || deref(sb.Pool) != "devhost" || sb.Labels["suite"] != "cli" || deref(sb.TtlSeconds) != 3600 ||
		sb.Resources.MemoryMiB != 256 {
		t.Fatalf("create: %+v", sb)
	}
	id := sb.Id

	var got client.Sandbox
	c.json(&got, "get", id)
	if got.Id != id || got.State != client.Running {
		t.Errorf("get: %+v", got)
	}
	if r := c.ok("get", id); !strings.Contains(r.stdout, "devhost") || !strings.Contains(r.stdout, "suite=cli,who=test") {
		t.Errorf("get as a table:\n%s", r.stdout)
	}
	if r := c.ok("get", id, "-o", "yaml"); !strings.Contains(r.stdout, "id: "+id) {
		t.Errorf("get -o yaml:\n%s", r.stdout)
	}

	// ls: filters, the table, IDs.
	var page struct{ Items []client.Sandbox }
	c.json(&page, "ls", "--label", "suite=cli", "--state", "running")
	if len(page.Items) != 1 || page.Items[0].Id != id {
		t.Errorf("ls --label: %+v", page.Items)
	}
	c.json(&page, "ls", "--label", "suite=other")
	if len(page.Items) != 0 {
		t.Errorf("ls --label suite=other: %+v", page.Items)
	}
	if r := c.ok("ls", "-o", "id", "--pool", "devhost"); strings.TrimSpace(r.stdout) != id {
		t.Errorf("ls -o id: %q", r.stdout)
	}
	if r := c.ok("ls"); !strings.HasPrefix(r.stdout, "ID ") || !strings.Contains(r.stdout, id) || strings.Contains(r.stdout, "\x1b[") {
		t.Errorf("ls, piped:\n%q", r.stdout)
	}

	// exec sees the sandbox's environment.
	var res execResult
	c.json(&res, "exec", id, "echo $GREETING")
	if res.ExitCode != 0 || res.Stdout != "hello\n" {
		t.Errorf("exec -o json: %+v", res)
	}

	c.json(&got, "ttl", id, "2h")
	if deref(got.TtlSeconds) != 7200 {
		t.Errorf("ttl 2h: %+v", got)
	}
	c.json(&got, "ttl", id, "0")
	if got.ExpiresAt != nil {
		t.Errorf("ttl 0 left an expiry: %+v", got)
	}

	// cp both ways, and a file the sandbox wrote.
	local := filepath.Join(t.TempDir(), "in.txt")
	if err := os.WriteFile(local, []byte("from the host\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c.ok("cp", local, id+":copied.txt")
	c.json(&res, "exec", id, "cat copied.txt && echo made here > made.txt")
	if res.Stdout != "from the host\n" {
		t.Errorf("the copied file holds %q", res.Stdout)
	}
	outDir := t.TempDir()
	c.ok("cp", id+":made.txt", outDir)
	if data, err := os.ReadFile(filepath.Join(outDir, "made.txt")); err != nil || string(data) != "made here\n" {
		t.Errorf("cp out: %q, %v", data, err)
	}
	if r := c.ok("cp", id+":made.txt", "-"); r.stdout != "made here\n" {
		t.Errorf("cp to stdout: %q", r.stdout)
	}
	c.runIn("piped\n", "cp", "-", id+":piped.txt")
	if r := c.ok("cp", id+":piped.txt", "-"); r.stdout != "piped\n" {
		t.Errorf("cp from stdin: %q", r.stdout)
	}
	c.fails(exitUsage, []string{"one side must be a sandbox"}, "cp", local, local)

	// stop, start; pause is not devhost's: unsupported_operation, exit 1.
	c.json(&got, "stop", id, "--wait")
	if got.State != client.Stopped {
		t.Errorf("stop --wait: %s", got.State)
	}
	c.json(&got, "start", id, "--wait")
	if got.State != client.Running {
		t.Errorf("start --wait: %s", got.State)
	}
	c.fails(exitError, []string{"unsupported_operation", "hint:"}, "pause", id)

	// Snapshots and a fork.
	var snap client.Snapshot
	c.json(&snap, "snapshot", "create", id)
	if snap.SandboxId != id || snap.Id == "" {
		t.Fatalf("snapshot create: %+v", snap)
	}
	var snaps struct{ Items []client.Snapshot }
	c.json(&snaps, "snapshot", "ls", id)
	if len(snaps.Items) != 1 || snaps.Items[0].Id != snap.Id {
		t.Errorf("snapshot ls: %+v", snaps.Items)
	}
	c.json(&snap, "snapshot", "get", snap.Id)
	var fork client.Sandbox
	c.json(&fork, "fork", id, "-l", "suite=cli", "-l", "forked=yes", "--wait")
	if fork.State != client.Running || fork.Labels["forked"] != "yes" || fork.Id == id {
		t.Errorf("fork: %+v", fork)
	}
	c.json(&res, "exec", fork.Id, "cat", "made.txt")
	if res.Stdout != "made here\n" {
		t.Errorf("the fork lacks the original's file: %+v", res)
	}
	// The fork took a snapshot of its own: every snapshot, oldest first, page after page.
	c.json(&snaps, "snapshot", "ls")
	if len(snaps.Items) != 2 || snaps.Items[0].Id != snap.Id {
		t.Errorf("snapshot ls of all: %+v", snaps.Items)
	}
	c.json(&snaps, "snapshot", "ls", "--limit", "1")
	if len(snaps.Items) != 1 || snaps.Items[0].Id != snap.Id {
		t.Errorf("snapshot ls --limit 1: %+v", snaps.Items)
	}
	c.json(&snaps, "snapshot", "ls", "--project", "acme/none")
	if len(snaps.Items) != 0 {
		t.Errorf("snapshot ls of another project: %+v", snaps.Items)
	}
	c.ok("snapshot", "rm", snap.Id)
	c.fails(exitNotFound, []string{"404", "not_found"}, "snapshot", "get", snap.Id)

	// pause and resume on the fake pool, which has them.
	var fake client.Sandbox
	c.json(&fake, "create", "--pool", "fake", "-l", "suite=cli", "--wait")
	c.json(&got, "pause", fake.Id, "--wait")
	if got.State != client.Paused {
		t.Errorf("pause: %s", got.State)
	}
	c.json(&got, "resume", fake.Id, "--wait")
	if got.State != client.Running {
		t.Errorf("resume: %s", got.State)
	}

	// Events: the history, as JSON.
	var evs struct {
		Items      []client.Event
		NextCursor string
	}
	c.json(&evs, "events", id)
	var types []string
	for _, e := range evs.Items {
		types = append(types, string(e.Type))
	}
	for _, want := range []string{"created", "placed", "running", "stopped", "started"} {
		if !slices.Contains(types, want) {
			t.Errorf("events of %s: %v, no %s", id, types, want)
		}
	}
	c.json(&evs, "events", "--type", "stopped")
	if len(evs.Items) != 1 || evs.Items[0].SandboxId != id {
		t.Errorf("events --type stopped: %+v", evs.Items)
	}

	// rm several at once, waiting.
	var gone struct{ Items []client.Sandbox }
	c.json(&gone, "rm", "--wait", id, fork.Id, fake.Id)
	for _, s := range gone.Items {
		if s.State != client.Terminated {
			t.Errorf("rm --wait: %s is %s", s.Id, s.State)
		}
	}
	if len(gone.Items) != 3 {
		t.Errorf("rm --wait: %+v", gone.Items)
	}
	c.json(&page, "ls", "--label", "suite=cli")
	if len(page.Items) != 0 {
		t.Errorf("ls after rm: %+v", page.Items)
	}

	// Refusals: exit codes and hints.
	c.fails(exitNotFound, []string{"404 not_found", "hint:"}, "get", "sbx_missing")
	c.fails(exitError, []string{"invalid_request", "nope", "pools ls"}, "create", "--pool", "nope")
	c.fails(exitNotFound, []string{"not_found"}, "rm", "sbx_missing")
}

// cp -r both ways: a tree goes in file by file and comes back whole, with empty
// directories and permission bits; what cannot be copied is said, not dropped silently.
func TestCopyDirectories(t *testing.T) {
	dd := startDaemon(t)
	c := dd.cli(t)
	var sb client.Sandbox
	c.json(&sb, "create", "--pool", "devhost", "--template", "devhost", "--wait")
	id := sb.Id

	src := filepath.Join(t.TempDir(), "src")
	for name, body := range map[string]string{
		"a.txt":                 "top\n",
		"sub/b.sh":              "#!/bin/sh\necho b\n",
		"sub/deeper/c.txt":      "deep\n",
		"sub/deeper/with space": "spaced\n",
	} {
		p := filepath.Join(src, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("a.txt", filepath.Join(src, "link")); err != nil {
		t.Fatal(err)
	}

	// Without -r a directory is a usage error that names the flag.
	c.fails(exitUsage, []string{"cp -r"}, "cp", src, id+":tree")
	c.fails(exitUsage, []string{"-r"}, "cp", "-r", "-", id+":tree")

	// Into the sandbox under a new name, and under its own name below a directory.
	r := c.ok("cp", "-r", src, id+":tree")
	if !strings.Contains(r.stderr, "skipped") || !strings.Contains(r.stderr, "link") || !strings.Contains(r.stderr, "4 files") {
		t.Errorf("cp -r in, stderr:\n%s", r.stderr)
	}
	c.ok("cp", "-r", src, id+":nested/")
	var res execResult
	c.json(&res, "exec", id, "cd tree && find . -type f | sort && cat sub/deeper/c.txt && test -f ../nested/src/sub/b.sh && echo nested")
	want := "./a.txt\n./sub/b.sh\n./sub/deeper/c.txt\n./sub/deeper/with space\ndeep\nnested\n"
	if res.ExitCode != 0 || res.Stdout != want {
		t.Errorf("the tree in the sandbox: %+v, want stdout %q", res, want)
	}

	// Out of the sandbox: an executable bit and an empty directory made there survive.
	c.json(&res, "exec", id, "chmod 755 tree/sub/b.sh && mkdir tree/empty")
	out := filepath.Join(t.TempDir(), "out")
	c.ok("cp", "-r", id+":tree", out)
	for name, body := range map[string]string{
		"a.txt": "top\n", "sub/b.sh": "#!/bin/sh\necho b\n", "sub/deeper/c.txt": "deep\n", "sub/deeper/with space": "spaced\n",
	} {
		if data, err := os.ReadFile(filepath.Join(out, filepath.FromSlash(name))); err != nil || string(data) != body {
			t.Errorf("%s copied out: %q, %v", name, data, err)
		}
	}
	if st, err := os.Stat(filepath.Join(out, "sub", "b.sh")); err != nil || st.Mode().Perm() != 0o755 {
		t.Errorf("b.sh copied out: %v, %v; want mode 0755", st, err)
	}
	if st, err := os.Stat(filepath.Join(out, "empty")); err != nil || !st.IsDir() {
		t.Errorf("the empty directory copied out: %v, %v", st, err)
	}
	// Into an existing directory it keeps its name.
	existing := t.TempDir()
	c.ok("cp", "-r", id+":tree/sub", existing)
	if data, err := os.ReadFile(filepath.Join(existing, "sub", "deeper", "c.txt")); err != nil || string(data) != "deep\n" {
		t.Errorf("cp -r into an existing directory: %q, %v", data, err)
	}
	c.fails(exitNotFound, []string{"404"}, "cp", "-r", id+":no-such-dir", filepath.Join(t.TempDir(), "x"))
	c.ok("rm", id)
}

func TestPlainName(t *testing.T) {
	for name, want := range map[string]bool{
		"a.txt": true, "with space": true, `back\slash`: true, ".hidden": true,
		"": false, ".": false, "..": false, "../x": false, "a/b": false, "/etc": false, "nul\x00": false,
	} {
		if got := plainName(name); got != want {
			t.Errorf("plainName(%q) = %v, want %v", name, got, want)
		}
	}
}

// With no pool asked for, the README's first sandbox lands on local, the dev pool
// that isolates, rather than devhost or fake, which are as free and as roomy.
func TestFirstSandboxIsIsolated(t *testing.T) {
	dd := startDaemon(t)
	if !slices.Contains(dd.devPools(t), "local") {
		if os.Getenv("DIFFERENTLY_SKIP_LOCAL") == "1" {
			t.Skip("DIFFERENTLY_SKIP_LOCAL=1: no local pool on this host")
		}
		t.Fatal("the dev daemon has no local pool: is bwrap installed? (DIFFERENTLY_SKIP_LOCAL=1 skips)")
	}
	c := dd.cli(t)
	var sb client.Sandbox
	c.json(&sb, "create", "--wait")
	if deref(sb.Pool) != "local" {
		t.Errorf("the first sandbox went to %q, want local", deref(sb.Pool))
	}
	c.ok("rm", sb.Id, "--wait")
}
