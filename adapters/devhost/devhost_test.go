package devhost

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/api"
)

const inst = "inst_test"

func newAdapter(t *testing.T) *Adapter {
	t.Helper()
	a, err := New(filepath.Join(t.TempDir(), "root"))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { cleanupCgroups(a) })
	return a
}

func create(t *testing.T, a *Adapter, id string, env map[string]string) adapters.Instance {
	t.Helper()
	in, err := a.Create(context.Background(), adapters.CreateRequest{ID: id, Installation: inst, Env: env})
	if err != nil {
		t.Fatalf("Create(%s): %v", id, err)
	}
	return in
}

func wantCode(t *testing.T, err error, code api.Code) {
	t.Helper()
	if got := api.CodeOf(err); got != code {
		t.Fatalf("error code = %q (%v), want %q", got, err, code)
	}
}

func TestParseConfig(t *testing.T) {
	tests := []struct {
		name    string
		cfg     map[string]any
		want    string
		wantErr string // substring of the message; "" means success
		key     string // the config key the error names in its details, if any
	}{
		{"ok", map[string]any{"root": "/var/lib/x"}, "/var/lib/x", "", ""},
		{"missing root", map[string]any{}, "", `"root" is required`, "root"},
		{"nil map", nil, "", `"root" is required`, "root"},
		{"wrong type", map[string]any{"root": 42}, "", "must be a string", "root"},
		{"empty", map[string]any{"root": " "}, "", "must be a directory path", "root"},
		{"unknown key", map[string]any{"root": "/x", "rooot": "/y"}, "", `unknown config key "rooot"`, ""},
		{"ignoreResources", map[string]any{"root": "/x", "ignoreResources": true}, "/x", "", ""},
		{"ignoreResources not a boolean", map[string]any{"root": "/x", "ignoreResources": "yes"}, "", "must be true or false", "ignoreResources"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseConfig(tt.cfg)
			if tt.wantErr == "" {
				if err != nil || got.Root != tt.want {
					t.Fatalf("ParseConfig = %+v, %v; want root %q", got, err, tt.want)
				}
				return
			}
			wantCode(t, err, api.CodeInvalidRequest)
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("error %q does not mention %q", err, tt.wantErr)
			}
			// The key lets pool validation point at config.<key>, not config.
			if tt.key != "" {
				if got := api.AsError(err).Details["key"]; got != tt.key {
					t.Fatalf("details key = %v, want %q", got, tt.key)
				}
			}
		})
	}
}

func TestFromConfigCreatesRoot(t *testing.T) {
	root := filepath.Join(t.TempDir(), "a", "b")
	a, err := FromConfig(map[string]any{"root": root})
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(root)
	if err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
		t.Fatalf("root: %v %v", fi, err)
	}
	if a.Root() != root {
		t.Fatalf("Root() = %q", a.Root())
	}
	if _, err := FromConfig(map[string]any{"root": root, "x": 1}); !api.IsCode(err, api.CodeInvalidRequest) {
		t.Fatalf("unknown key: %v", err)
	}
}

func TestInfoCapabilitiesHealth(t *testing.T) {
	a := newAdapter(t)
	ctx := context.Background()
	info := a.Info()
	if info.Kind != "devhost" || info.Trust != api.TrustPrivate || info.Protocol != adapters.ProtocolVersion ||
		info.Isolation != "none: host processes in a per-sandbox directory" {
		t.Fatalf("Info = %+v", info)
	}
	caps, err := a.Capabilities(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"exec", "exec.stdin", "exec.stream", "files", "fork", "isolation.none", "lifecycle.stop-start",
		"persistence.disk", "pty", "snapshots.disk", "arch." + runtime.GOARCH}
	slices.Sort(want)
	if !slices.Equal(caps.Features, want) {
		t.Fatalf("features = %v, want %v", caps.Features, want)
	}
	// Every declared feature is backed by an implemented interface.
	if eff := adapters.EffectiveFeatures(a, caps.Features); !slices.Equal(eff, caps.Features) {
		t.Fatalf("effective features %v differ from declared %v", eff, caps.Features)
	}
	if c, err := a.Capacity(ctx); err != nil || c.Bounded {
		t.Fatalf("Capacity = %+v, %v", c, err)
	}
	if err := a.Health(ctx); err != nil {
		t.Fatalf("Health: %v", err)
	}
	if err := os.RemoveAll(a.Root()); err != nil {
		t.Fatal(err)
	}
	wantCode(t, a.Health(ctx), api.CodeProviderUnavailable)
	if err := os.WriteFile(a.Root(), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	wantCode(t, a.Health(ctx), api.CodeProviderUnavailable)
}

func TestCreateGetListDelete(t *testing.T) {
	a := newAdapter(t)
	ctx := context.Background()
	in := create(t, a, "sbx_1", nil)
	if in.Ref != "sbx_1" || in.SandboxID != "sbx_1" || in.State != adapters.StateRunning {
		t.Fatalf("Create = %+v", in)
	}
	got, err := a.Get(ctx, in.Ref)
	if err != nil || got != in {
		t.Fatalf("Get = %+v, %v", got, err)
	}
	list, err := a.List(ctx, inst)
	if err != nil || len(list) != 1 || list[0] != in {
		t.Fatalf("List = %+v, %v", list, err)
	}
	fi, err := os.Stat(filepath.Join(a.sandboxDir("sbx_1"), metaFile))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("meta.json: %v %v", fi, err)
	}
	for range 2 { // idempotent
		if err := a.Delete(ctx, in.Ref); err != nil {
			t.Fatalf("Delete: %v", err)
		}
	}
	if _, err := os.Stat(a.sandboxDir("sbx_1")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("directory left after Delete: %v", err)
	}
	_, err = a.Get(ctx, in.Ref)
	wantCode(t, err, api.CodeNotFound)
	if list, err := a.List(ctx, inst); err != nil || len(list) != 0 || list == nil {
		t.Fatalf("List after delete = %#v, %v", list, err)
	}
}

func TestCreateStoresRecord(t *testing.T) {
	fixed := time.Date(2026, 10, 28, 12, 0, 0, 0, time.UTC)
	a, err := New(t.TempDir(), WithClock(func() time.Time { return fixed }), WithIgnoreResources())
	if err != nil {
		t.Fatal(err)
	}
	_, err = a.Create(context.Background(), adapters.CreateRequest{
		ID: "sbx_r", Installation: inst, Template: Template, Env: map[string]string{"A": "1"},
		Labels: map[string]string{"team": "x"}, Resources: adapters.Resources{CPU: 2},
	})
	if err != nil {
		t.Fatal(err)
	}
	m, err := a.readMeta("sbx_r")
	if err != nil {
		t.Fatal(err)
	}
	if !m.CreatedAt.Equal(fixed) || m.Template != Template || m.Env["A"] != "1" || m.Resources.CPU != 2 ||
		m.Labels["team"] != "x" || m.Labels[adapters.LabelSandboxID] != "sbx_r" || m.Labels[adapters.LabelInstallation] != inst {
		t.Fatalf("record = %+v", m)
	}
}

// TestCreateRefusesWhatItCannotHonour: devhost offers one template and applies no
// resources. Another template, or resources without ignoreResources, is
// invalid_request naming what was asked, and nothing is created; Capabilities
// declares the template, so placement does not send it other ones.
func TestCreateRefusesWhatItCannotHonour(t *testing.T) {
	ctx := context.Background()
	a := newAdapter(t)
	caps, err := a.Capabilities(ctx)
	if err != nil || !slices.Equal(caps.Templates, []string{Template}) {
		t.Fatalf("Capabilities templates = %v, %v", caps.Templates, err)
	}
	for _, tt := range []struct {
		name    string
		req     adapters.CreateRequest
		mention string
	}{
		{"template", adapters.CreateRequest{Template: "python"}, `template "python"`},
		{"cpu", adapters.CreateRequest{Resources: adapters.Resources{CPU: 0.5}}, "cpu 0.5"},
		{"memory", adapters.CreateRequest{Resources: adapters.Resources{MemoryMiB: 512}}, "memoryMiB 512"},
		{"disk", adapters.CreateRequest{Resources: adapters.Resources{DiskGiB: 1}}, "diskGiB 1"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tt.req.ID, tt.req.Installation = "sbx_refused", inst
			_, err := a.Create(ctx, tt.req)
			wantCode(t, err, api.CodeInvalidRequest)
			if !strings.Contains(err.Error(), tt.mention) {
				t.Fatalf("error %q does not mention %s", err, tt.mention)
			}
			_, err = a.Get(ctx, "sbx_refused")
			wantCode(t, err, api.CodeNotFound)
		})
	}
	// Its own template, or none, is fine; resources are with ignoreResources.
	if _, err := a.Create(ctx, adapters.CreateRequest{ID: "sbx_tmpl", Installation: inst, Template: Template}); err != nil {
		t.Fatal(err)
	}
	lenient, err := FromConfig(map[string]any{"root": t.TempDir(), "ignoreResources": true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cleanupCgroups(lenient) })
	if _, err := lenient.Create(ctx, adapters.CreateRequest{ID: "sbx_res", Installation: inst,
		Resources: adapters.Resources{CPU: 2, MemoryMiB: 1024, DiskGiB: 5}}); err != nil {
		t.Fatal(err)
	}
}

func TestCreateIdempotent(t *testing.T) {
	ctx := context.Background()
	t.Run("sequential", func(t *testing.T) {
		a := newAdapter(t)
		first := create(t, a, "sbx_seq", map[string]string{"A": "1"})
		second, err := a.Create(ctx, adapters.CreateRequest{ID: "sbx_seq", Installation: "inst_other"})
		if err != nil || second != first {
			t.Fatalf("second Create = %+v, %v; want %+v", second, err, first)
		}
		// The second request changed nothing.
		if list, _ := a.List(ctx, "inst_other"); len(list) != 0 {
			t.Fatalf("second Create re-owned the instance: %+v", list)
		}
	})
	t.Run("concurrent", func(t *testing.T) {
		a := newAdapter(t)
		var wg sync.WaitGroup
		refs := make([]string, 8)
		errs := make([]error, 8)
		for i := range 8 {
			wg.Go(func() {
				in, err := a.Create(ctx, adapters.CreateRequest{ID: "sbx_conc", Installation: inst})
				refs[i], errs[i] = in.Ref, err
			})
		}
		wg.Wait()
		for i := range 8 {
			if errs[i] != nil || refs[i] != "sbx_conc" {
				t.Fatalf("Create %d = %q, %v", i, refs[i], errs[i])
			}
		}
		list, err := a.List(ctx, inst)
		if err != nil || len(list) != 1 {
			t.Fatalf("List = %+v, %v", list, err)
		}
		entries, _ := os.ReadDir(a.sandboxesDir())
		if len(entries) != 1 {
			t.Fatalf("sandboxes dir holds %d entries, want 1 (no staging leftovers)", len(entries))
		}
	})
}

func TestRestartSurvival(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	a, err := New(root)
	if err != nil {
		t.Fatal(err)
	}
	create(t, a, "sbx_a", nil)
	create(t, a, "sbx_b", nil)
	if err := a.Stop(ctx, "sbx_b"); err != nil {
		t.Fatal(err)
	}
	if err := a.WriteFile(ctx, "sbx_a", "keep.txt", []byte("kept")); err != nil {
		t.Fatal(err)
	}

	b, err := New(root)
	if err != nil {
		t.Fatal(err)
	}
	list, err := b.List(ctx, inst)
	if err != nil || len(list) != 2 {
		t.Fatalf("List after restart = %+v, %v", list, err)
	}
	if got, err := b.Get(ctx, "sbx_b"); err != nil || got.State != adapters.StateStopped {
		t.Fatalf("Get after restart = %+v, %v", got, err)
	}
	if data, err := b.ReadFile(ctx, "sbx_a", "keep.txt"); err != nil || string(data) != "kept" {
		t.Fatalf("ReadFile after restart = %q, %v", data, err)
	}
	if in, err := b.Create(ctx, adapters.CreateRequest{ID: "sbx_a", Installation: inst}); err != nil || in.Ref != "sbx_a" {
		t.Fatalf("Create after restart = %+v, %v", in, err)
	}
	if data, _ := b.ReadFile(ctx, "sbx_a", "keep.txt"); string(data) != "kept" {
		t.Fatal("Create after restart replaced the existing instance")
	}
}

func TestListByInstallation(t *testing.T) {
	a := newAdapter(t)
	ctx := context.Background()
	for i, installation := range []string{"inst_a", "inst_b", "inst_a", "inst_c"} {
		if _, err := a.Create(ctx, adapters.CreateRequest{ID: fmt.Sprintf("sbx_%d", i), Installation: installation}); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		installation string
		want         []string
	}{
		{"inst_a", []string{"sbx_0", "sbx_2"}},
		{"inst_b", []string{"sbx_1"}},
		{"inst_none", nil},
	}
	for _, tt := range tests {
		list, err := a.List(ctx, tt.installation)
		if err != nil {
			t.Fatal(err)
		}
		var refs []string
		for _, in := range list {
			if in.SandboxID != in.Ref {
				t.Fatalf("instance %+v lacks its sandbox id", in)
			}
			refs = append(refs, in.Ref)
		}
		if !slices.Equal(refs, tt.want) {
			t.Fatalf("List(%s) = %v, want %v", tt.installation, refs, tt.want)
		}
	}
}

func TestListFailsOnUnreadableInstance(t *testing.T) {
	a := newAdapter(t)
	create(t, a, "sbx_ok", nil)
	// A record that exists but cannot be read (here: a directory in its place, which
	// fails even for root) must fail the whole List, not be skipped.
	dir := a.sandboxDir("sbx_bad")
	if err := os.MkdirAll(filepath.Join(dir, metaFile), 0o700); err != nil {
		t.Fatal(err)
	}
	list, err := a.List(context.Background(), inst)
	wantCode(t, err, api.CodeProviderUnavailable)
	if list != nil {
		t.Fatalf("partial list returned: %+v", list)
	}
}

func TestDebrisIsNotAnInstance(t *testing.T) {
	a := newAdapter(t)
	ctx := context.Background()
	tests := []struct {
		name  string
		setup func(dir string) error
	}{
		{"no record", func(dir string) error { return os.MkdirAll(filepath.Join(dir, "fs"), 0o755) }},
		{"corrupt record", func(dir string) error {
			if err := os.MkdirAll(filepath.Join(dir, "fs"), 0o755); err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(dir, metaFile), []byte(`{"sandboxId":`), 0o600)
		}},
		{"record of another sandbox", func(dir string) error {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(dir, metaFile),
				[]byte(`{"sandboxId":"sbx_x","installation":"inst_test","state":"running"}`), 0o600)
		}},
		{"plain file", func(dir string) error { return os.WriteFile(dir, []byte("x"), 0o600) }},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := fmt.Sprintf("sbx_debris%d", i)
			dir := a.sandboxDir(id)
			if err := tt.setup(dir); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "fs", "stale"), nil, 0o600); err != nil && !errors.Is(err, os.ErrNotExist) && !isNotDir(err) {
				t.Fatal(err)
			}
			_, err := a.Get(ctx, id)
			wantCode(t, err, api.CodeNotFound)
			if list, err := a.List(ctx, inst); err != nil || len(list) != 0 {
				t.Fatalf("List = %+v, %v", list, err)
			}
			create(t, a, id, nil)
			if _, err := a.ReadFile(ctx, id, "stale"); !api.IsCode(err, api.CodeNotFound) {
				t.Fatalf("debris survived Create: %v", err)
			}
			if err := a.Delete(ctx, id); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func isNotDir(err error) bool {
	var pe *os.PathError
	return errors.As(err, &pe) && pe.Err.Error() == "not a directory"
}

func TestInvalidIDs(t *testing.T) {
	a := newAdapter(t)
	ctx := context.Background()
	create(t, a, "sbx_real", nil)
	bad := []string{"", ".", "..", "../sbx_real", "a/b", "sbx real", "sbx\x00", "é", string(make([]byte, 129))}
	long := make([]byte, 129)
	for i := range long {
		long[i] = 'a'
	}
	bad = append(bad, string(long))
	for _, id := range bad {
		t.Run(fmt.Sprintf("%q", id), func(t *testing.T) {
			_, err := a.Create(ctx, adapters.CreateRequest{ID: id, Installation: inst})
			wantCode(t, err, api.CodeInvalidRequest)
			_, err = a.Get(ctx, id)
			wantCode(t, err, api.CodeNotFound)
			_, err = a.Exec(ctx, id, api.ExecRequest{Command: "true"})
			wantCode(t, err, api.CodeNotFound)
			wantCode(t, a.Stop(ctx, id), api.CodeNotFound)
			wantCode(t, a.Start(ctx, id), api.CodeNotFound)
			_, err = a.ReadFile(ctx, id, "x")
			wantCode(t, err, api.CodeNotFound)
			_, err = a.Snapshot(ctx, id, adapters.SnapshotDisk)
			wantCode(t, err, api.CodeNotFound)
			if err := a.Delete(ctx, id); err != nil {
				t.Fatalf("Delete of an invalid ref = %v, want success", err)
			}
		})
	}
	if _, err := a.Get(ctx, "sbx_real"); err != nil {
		t.Fatalf("an invalid ref touched a real instance: %v", err)
	}
	// 128 characters is still fine.
	create(t, a, string(long[:128]), nil)
}

func TestCreateValidates(t *testing.T) {
	a := newAdapter(t)
	tests := []adapters.CreateRequest{
		{ID: "sbx_1"}, // no installation
		{ID: "sbx_1", Installation: inst, Env: map[string]string{"A=B": "x"}},
		{ID: "sbx_1", Installation: inst, FromSnapshot: "snap_missing"},
		{ID: "sbx_1", Installation: inst, FromSnapshot: "../x"},
		{ID: "sbx_1", Installation: inst, Resources: adapters.Resources{CPU: -1}},
	}
	for _, req := range tests {
		_, err := a.Create(context.Background(), req)
		wantCode(t, err, api.CodeInvalidRequest)
	}
	if list, err := a.List(context.Background(), inst); err != nil || len(list) != 0 {
		t.Fatalf("failed Creates left instances: %+v, %v", list, err)
	}
	if entries, _ := os.ReadDir(a.sandboxesDir()); len(entries) != 0 {
		t.Fatalf("failed Creates left directories: %v", entries)
	}
}

func TestContextErrorKeepsBothIdentities(t *testing.T) {
	err := contextError(context.Canceled)
	if !errors.Is(err, context.Canceled) || api.CodeOf(err) != api.CodeProviderUnavailable {
		t.Fatalf("contextError = %v (code %s)", err, api.CodeOf(err))
	}
	a := newAdapter(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = a.Create(ctx, adapters.CreateRequest{ID: "sbx_c", Installation: inst})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Create with a cancelled ctx = %v", err)
	}
}
