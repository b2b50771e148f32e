package devhost

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/api"
)

func TestStopStart(t *testing.T) {
	a := newAdapter(t)
	ctx := context.Background()
	create(t, a, "sbx_s", nil)
	for range 2 { // idempotent
		if err := a.Stop(ctx, "sbx_s"); err != nil {
			t.Fatal(err)
		}
	}
	if in, _ := a.Get(ctx, "sbx_s"); in.State != adapters.StateStopped {
		t.Fatalf("state = %s", in.State)
	}
	_, err := a.Exec(ctx, "sbx_s", api.ExecRequest{Command: "true"})
	wantCode(t, err, api.CodeInvalidState)
	_, err = a.ExecStream(ctx, "sbx_s", api.ExecRequest{Command: "true"}, func(api.ExecEvent) error { return nil })
	wantCode(t, err, api.CodeInvalidState)
	// The disk persists and stays reachable.
	if err := a.WriteFile(ctx, "sbx_s", "f", []byte("x")); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := a.Start(ctx, "sbx_s"); err != nil {
			t.Fatal(err)
		}
	}
	res, err := a.Exec(ctx, "sbx_s", api.ExecRequest{Command: "cat f"})
	if err != nil || res.Stdout != "x" {
		t.Fatalf("Exec after Start = %+v, %v", res, err)
	}
	wantCode(t, a.Stop(ctx, "sbx_missing"), api.CodeNotFound)
	wantCode(t, a.Start(ctx, "sbx_missing"), api.CodeNotFound)
}

func TestBrokenSandboxIsSandboxFailed(t *testing.T) {
	a := newAdapter(t)
	ctx := context.Background()
	create(t, a, "sbx_broken", nil)
	if err := os.RemoveAll(a.fsDir("sbx_broken")); err != nil {
		t.Fatal(err)
	}
	_, err := a.Exec(ctx, "sbx_broken", api.ExecRequest{Command: "true"})
	wantCode(t, err, api.CodeSandboxFailed)
	_, err = a.ReadFile(ctx, "sbx_broken", "x")
	wantCode(t, err, api.CodeSandboxFailed)
	if err := a.Delete(ctx, "sbx_broken"); err != nil {
		t.Fatal(err)
	}
}

func TestDeleteRemovesReadOnlyTrees(t *testing.T) {
	a := newAdapter(t)
	ctx := context.Background()
	create(t, a, "sbx_ro", nil)
	// Like Go's module cache: read-only directories holding read-only files.
	res, err := a.Exec(ctx, "sbx_ro", api.ExecRequest{Command: "mkdir -p m/a/b && touch m/a/b/f && chmod -R a-w m"})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("setup: %+v, %v", res, err)
	}
	if err := a.Delete(ctx, "sbx_ro"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(a.sandboxDir("sbx_ro")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("directory survived: %v", err)
	}
}

// TestConcurrentUse drives every operation on several sandboxes at once; its value
// is in running under -race.
func TestConcurrentUse(t *testing.T) {
	a := newAdapter(t)
	ctx := context.Background()
	var wg sync.WaitGroup
	for i := range 4 {
		id := fmt.Sprintf("sbx_c%d", i)
		create(t, a, id, nil)
		for j := range 3 {
			wg.Go(func() {
				name := fmt.Sprintf("f%d", j)
				if err := a.WriteFile(ctx, id, name, []byte(name)); err != nil {
					t.Error(err)
					return
				}
				if res, err := a.Exec(ctx, id, api.ExecRequest{Command: "cat " + name}); err != nil || res.Stdout != name {
					t.Errorf("Exec = %+v, %v", res, err)
				}
				if _, err := a.ListFiles(ctx, id, ""); err != nil {
					t.Error(err)
				}
				if _, err := a.Snapshot(ctx, id, adapters.SnapshotDisk); err != nil {
					t.Error(err)
				}
				if _, err := a.List(ctx, inst); err != nil {
					t.Error(err)
				}
			})
		}
	}
	wg.Wait()
	for i := range 4 {
		wg.Go(func() {
			if err := a.Delete(ctx, fmt.Sprintf("sbx_c%d", i)); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if list, err := a.List(ctx, inst); err != nil || len(list) != 0 {
		t.Fatalf("List = %+v, %v", list, err)
	}
}
