package devhost

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/api"
)

func TestSnapshotAndFork(t *testing.T) {
	a := newAdapter(t)
	ctx := context.Background()
	create(t, a, "sbx_src", nil)
	res, err := a.Exec(ctx, "sbx_src", api.ExecRequest{Command: strings.Join([]string{
		"mkdir -p d/e ro",
		"printf hello > d/e/f.txt",
		"printf '#!/bin/sh\\necho run\\n' > run.sh && chmod 750 run.sh",
		"ln -s d/e/f.txt link",
		"ln -s /nonexistent dangling",
		"printf x > ro/file && chmod 555 ro",
		"mkfifo fifo",
	}, " && ")})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("setup: %+v, %v", res, err)
	}

	snap, err := a.Snapshot(ctx, "sbx_src", adapters.SnapshotDisk)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(snap.Ref, "snap_") || !validID(snap.Ref) || snap.Kind != adapters.SnapshotDisk {
		t.Fatalf("Snapshot = %+v", snap)
	}
	wantSize := int64(len("hello") + len("#!/bin/sh\necho run\n") + len("x"))
	if snap.SizeBytes != wantSize {
		t.Fatalf("SizeBytes = %d, want %d", snap.SizeBytes, wantSize)
	}
	// Later changes to the source do not reach the snapshot.
	if err := a.WriteFile(ctx, "sbx_src", "d/e/f.txt", []byte("changed")); err != nil {
		t.Fatal(err)
	}

	in, err := a.Create(ctx, adapters.CreateRequest{ID: "sbx_fork", Installation: inst, FromSnapshot: snap.Ref})
	if err != nil || in.State != adapters.StateRunning {
		t.Fatalf("Create from snapshot = %+v, %v", in, err)
	}
	if data, err := a.ReadFile(ctx, "sbx_fork", "d/e/f.txt"); err != nil || string(data) != "hello" {
		t.Fatalf("restored file = %q, %v", data, err)
	}
	res, err = a.Exec(ctx, "sbx_fork", api.ExecRequest{Command: "./run.sh; cat link; readlink dangling; stat -c %a run.sh ro; ls fifo 2>&1 >/dev/null | wc -l"})
	if err != nil || res.Stdout != "run\nhello/nonexistent\n750\n555\n1\n" {
		t.Fatalf("restored tree: %q, %v", res.Stdout, err)
	}
	fi, err := os.Lstat(filepath.Join(a.fsDir("sbx_fork"), "link"))
	if err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("link restored as %v, %v", fi, err)
	}

	// Deleting the source, and read-only directories in it, is no problem.
	if err := a.Delete(ctx, "sbx_src"); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := a.DeleteSnapshot(ctx, snap.Ref); err != nil {
			t.Fatalf("DeleteSnapshot: %v", err)
		}
	}
	if _, err := os.Stat(filepath.Join(a.snapshotsDir(), snap.Ref)); !os.IsNotExist(err) {
		t.Fatalf("snapshot directory survived: %v", err)
	}
	_, err = a.Create(ctx, adapters.CreateRequest{ID: "sbx_fork2", Installation: inst, FromSnapshot: snap.Ref})
	wantCode(t, err, api.CodeInvalidRequest)
	// The fork is independent of the deleted snapshot.
	if data, err := a.ReadFile(ctx, "sbx_fork", "d/e/f.txt"); err != nil || string(data) != "hello" {
		t.Fatalf("fork after snapshot delete = %q, %v", data, err)
	}
	if entries, _ := os.ReadDir(a.snapshotsDir()); len(entries) != 0 {
		t.Fatalf("snapshots dir holds %v", entries)
	}
}

func TestSnapshotErrors(t *testing.T) {
	a := newAdapter(t)
	ctx := context.Background()
	create(t, a, "sbx_s", nil)
	tests := []struct {
		name string
		ref  string
		kind adapters.SnapshotKind
		code api.Code
	}{
		{"memory", "sbx_s", adapters.SnapshotMemory, api.CodeUnsupportedOperation},
		{"bad kind", "sbx_s", "full", api.CodeInvalidRequest},
		{"missing instance", "sbx_none", adapters.SnapshotDisk, api.CodeNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := a.Snapshot(ctx, tt.ref, tt.kind)
			wantCode(t, err, tt.code)
		})
	}
	_, err := a.Snapshot(ctx, "sbx_s", adapters.SnapshotMemory)
	if e := api.AsError(err); e == nil || e.Details["operation"] != "snapshots.memory" {
		t.Fatalf("memory snapshot error = %#v", err)
	}
	// A snapshot directory without its record is not a snapshot.
	if err := os.MkdirAll(filepath.Join(a.snapshotsDir(), "snap_partial", "fs"), 0o700); err != nil {
		t.Fatal(err)
	}
	_, err = a.Create(ctx, adapters.CreateRequest{ID: "sbx_p", Installation: inst, FromSnapshot: "snap_partial"})
	wantCode(t, err, api.CodeInvalidRequest)
	for _, ref := range []string{"snap_none", "../sandboxes", ""} {
		if err := a.DeleteSnapshot(ctx, ref); err != nil {
			t.Fatalf("DeleteSnapshot(%q) = %v", ref, err)
		}
	}
	if _, err := a.Get(ctx, "sbx_s"); err != nil {
		t.Fatalf("DeleteSnapshot touched an instance: %v", err)
	}
}

func TestSnapshotOfStoppedInstance(t *testing.T) {
	a := newAdapter(t)
	ctx := context.Background()
	create(t, a, "sbx_s", nil)
	if err := a.WriteFile(ctx, "sbx_s", "f", []byte("disk")); err != nil {
		t.Fatal(err)
	}
	if err := a.Stop(ctx, "sbx_s"); err != nil {
		t.Fatal(err)
	}
	snap, err := a.Snapshot(ctx, "sbx_s", adapters.SnapshotDisk)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Create(ctx, adapters.CreateRequest{ID: "sbx_t", Installation: inst, FromSnapshot: snap.Ref}); err != nil {
		t.Fatal(err)
	}
	if data, err := a.ReadFile(ctx, "sbx_t", "f"); err != nil || string(data) != "disk" {
		t.Fatalf("ReadFile = %q, %v", data, err)
	}
}

// Files created and renamed away while a snapshot copies the tree (WriteFile's
// temporary files, a command's scratch files) are left out of it, not an error.
func TestCopyTreeOfAChangingTree(t *testing.T) {
	src := t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "kept"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	defer func() { <-done }() // the writer ends within its 3000 rounds, even after a failure
	go func() {
		defer close(done)
		for i := range 3000 {
			tmp := filepath.Join(src, fmt.Sprintf(".tmp-%d", i))
			if err := os.WriteFile(tmp, []byte("y"), 0o644); err != nil {
				t.Error(err)
				return
			}
			if err := os.Rename(tmp, filepath.Join(src, "renamed")); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	for n := 0; ; n++ {
		select {
		case <-done:
			return
		default:
		}
		dst := filepath.Join(t.TempDir(), "copy")
		if _, err := copyTree(src, dst); err != nil {
			t.Fatalf("copy %d: %v", n, err)
		}
		if b, err := os.ReadFile(filepath.Join(dst, "kept")); err != nil || string(b) != "x" {
			t.Fatalf("copy %d lost a file that stayed: %q, %v", n, b, err)
		}
	}
}
