package sandboxes_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/server/sandboxes"
	"github.com/different-ai/differently/server/store"
)

// content is an upload held in memory. readErr, when set, is the sender's failure
// that Done and ReadAll report.
type content struct {
	data    []byte
	size    int64
	readErr error
	done    []bool
}

func (c *content) Size() int64       { return c.size }
func (c *content) Stream() io.Reader { return bytes.NewReader(c.data) }
func (c *content) Done(failed bool) error {
	c.done = append(c.done, failed)
	return c.readErr
}
func (c *content) ReadAll() ([]byte, error) { return c.data, c.readErr }

func TestFiles(t *testing.T) {
	f := newFixtureWith(t, sandboxes.Options{MaxTransfers: 1, LargeTransferBytes: 4})
	ctx := context.Background()
	sb := running(t, f)

	small := &content{data: []byte("hi"), size: 2}
	if err := f.svc.WriteFile(ctx, alice, sb.ID, "/work/a.txt", small); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(small.done, []bool{false}) {
		t.Errorf("Done calls %v, want one after a write that worked", small.done)
	}
	items, err := f.svc.ListFiles(ctx, alice, sb.ID, "/work")
	if err != nil || len(items) != 1 || !strings.HasSuffix(items[0].Path, "a.txt") {
		t.Fatalf("list: %+v, %v", items, err)
	}

	// A read of a large file holds the only slot until it is closed.
	big := bytes.Repeat([]byte("x"), 100)
	if err := f.svc.WriteFile(ctx, alice, sb.ID, "/work/big", &content{data: big, size: int64(len(big))}); err != nil {
		t.Fatal(err)
	}
	file, err := f.svc.ReadFile(ctx, alice, sb.ID, "/work/big")
	if err != nil {
		t.Fatal(err)
	}
	err = f.svc.WriteFile(ctx, bob, sb.ID, "/work/c", &content{size: -1})
	if !api.IsCode(err, api.CodeNotFound) {
		t.Fatalf("bob's write: %v, want not_found before any slot is asked for", err)
	}
	err = f.svc.WriteFile(ctx, alice, sb.ID, "/work/c", &content{data: big, size: -1})
	if !errors.Is(err, sandboxes.ErrTransferLimit) || !api.IsCode(err, api.CodeProviderUnavailable) {
		t.Fatalf("write while the slot is held: %v, want the transfer limit", err)
	}
	if ra, ok := errors.AsType[*sandboxes.RetryAfterError](err); !ok || ra.Seconds <= 0 {
		t.Fatalf("no retry hint in %v", err)
	}
	got, err := io.ReadAll(file)
	if err != nil || !bytes.Equal(got, big) || file.Size != int64(len(big)) {
		t.Fatalf("read %d bytes (size %d), %v; want %d", len(got), file.Size, err, len(big))
	}
	file.Close()
	if err := f.svc.WriteFile(ctx, alice, sb.ID, "/work/c", &content{data: big, size: -1}); err != nil {
		t.Fatalf("write after the read closed: %v", err)
	}

	// The sender's failure wins over whatever the adapter made of it.
	broken := &content{data: []byte("x"), size: 1, readErr: api.Errorf(api.CodeInvalidRequest, "broken off")}
	if err := f.svc.WriteFile(ctx, alice, sb.ID, "/work/d", broken); !api.IsCode(err, api.CodeInvalidRequest) {
		t.Fatalf("broken upload: %v, want the sender's invalid_request", err)
	}
}

// events collects a streamed command's output.
type events struct {
	out []api.ExecEvent
}

func (e *events) Emit(ev api.ExecEvent) error { e.out = append(e.out, ev); return nil }
func (e *events) EmitBytes(stream string, data []byte) error {
	return e.Emit(api.ExecEvent{Stream: stream, Data: string(data)})
}

func TestCommand(t *testing.T) {
	f := newFixture(t, 0)
	ctx := context.Background()
	sb := running(t, f)
	req := api.ExecRequest{Args: []string{"echo", "hello"}}
	cmd, err := f.svc.Command(ctx, alice, sb.ID, req)
	if err != nil {
		t.Fatal(err)
	}
	res, err := cmd.Run(ctx)
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("run: %+v, %v", res, err)
	}
	var ev events
	final, err := cmd.Stream(ctx, &ev)
	if err != nil || final.ExitCode == nil || *final.ExitCode != 0 {
		t.Fatalf("stream: final %+v, %v; want exit 0", final, err)
	}
	var stdout strings.Builder
	for _, e := range ev.out {
		if e.Stream == api.StreamStdout {
			stdout.WriteString(e.Data)
		}
	}
	if stdout.String() != res.Stdout {
		t.Errorf("streamed stdout %q, buffered %q", stdout.String(), res.Stdout)
	}

	if _, err := f.svc.Command(ctx, alice, sb.ID, api.ExecRequest{}); !api.IsCode(err, api.CodeInvalidRequest) {
		t.Errorf("no command: %v, want invalid_request", err)
	}
	queued, _, _, err := f.svc.Create(ctx, alice, sandboxes.CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.Command(ctx, alice, queued.ID, req); !api.IsCode(err, api.CodeInvalidState) {
		t.Errorf("exec in a queued sandbox: %v, want invalid_state", err)
	}
}

func TestExposePort(t *testing.T) {
	f := newFixture(t, 0)
	ctx := context.Background()
	sb := running(t, f)
	for _, port := range []int{0, 65536} {
		if _, err := f.svc.ExposePort(ctx, alice, sb.ID, port); !api.IsCode(err, api.CodeInvalidRequest) {
			t.Errorf("port %d: %v, want invalid_request", port, err)
		}
	}
	if url, err := f.svc.ExposePort(ctx, alice, sb.ID, 8080); err != nil || url == "" {
		t.Fatalf("port 8080: %q, %v", url, err)
	}
}

func TestSnapshotAndFork(t *testing.T) {
	f := newFixture(t, 0)
	ctx := context.Background()
	sb := running(t, f)
	if _, err := f.svc.CreateSnapshot(ctx, alice, sb.ID, ptr("photo")); !api.IsCode(err, api.CodeInvalidRequest) {
		t.Fatalf("unknown kind: %v, want invalid_request", err)
	}
	sn, err := f.svc.CreateSnapshot(ctx, alice, sb.ID, nil)
	if err != nil || sn.Kind != "disk" || sn.SandboxID != sb.ID {
		t.Fatalf("snapshot: %+v, %v; want a disk snapshot of %s", sn, err, sb.ID)
	}
	if _, err := f.svc.Snapshot(ctx, bob, sn.ID); !api.IsCode(err, api.CodeNotFound) {
		t.Fatalf("bob reads alice's snapshot: %v, want not_found", err)
	}
	list, err := f.svc.Snapshots(ctx, alice, sb.ID)
	if err != nil || len(list) != 1 || list[0].ID != sn.ID {
		t.Fatalf("list: %+v, %v", list, err)
	}

	child, err := f.svc.Fork(ctx, alice, sb.ID, sandboxes.ForkRequest{Labels: &map[string]string{"copy": "yes"}})
	if err != nil {
		t.Fatal(err)
	}
	if child.State != store.StateQueued || child.FromSnapshot == "" || child.Labels["copy"] != "yes" ||
		!slices.Equal(child.Placement.AllowedPools, []string{"fake"}) {
		t.Fatalf("fork: %+v; want a queued copy restored from a snapshot, pinned to pool fake", child)
	}
	if _, err := f.svc.Fork(ctx, alice, sb.ID, sandboxes.ForkRequest{TTLSeconds: ptr(int64(-1))}); !api.IsCode(err, api.CodeInvalidRequest) {
		t.Fatalf("fork with a negative ttl: %v, want invalid_request", err)
	}
	if list, _ := f.svc.Snapshots(ctx, alice, sb.ID); len(list) != 2 {
		t.Errorf("%d snapshots after a fork and a refused one, want 2: the refusal takes none", len(list))
	}

	if err := f.svc.DeleteSnapshot(ctx, alice, sn.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.Snapshot(ctx, alice, sn.ID); !api.IsCode(err, api.CodeNotFound) {
		t.Fatalf("deleted snapshot: %v, want not_found", err)
	}
}
