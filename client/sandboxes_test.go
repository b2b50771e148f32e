package client_test

import (
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/client"
)

func devhost() *client.Placement {
	return &client.Placement{AllowedPools: &[]string{"devhost"}}
}

// TestSandboxLifecycle drives every sandbox wrapper against a real daemon, in the
// order a user would: create, wait, exec plain and streamed, files, stop and start,
// snapshot, fork, delete.
func TestSandboxLifecycle(t *testing.T) {
	dd := startDaemon(t)
	c := dd.client(t)
	ctx := testCtx(t)

	create := client.SandboxCreate{
		Placement: devhost(),
		Labels:    &map[string]string{"team": "client"},
		Env:       &map[string]string{"GREETING": "hello"},
	}
	sb, err := c.CreateSandbox(ctx, create, "lifecycle-1")
	if err != nil {
		t.Fatal(err)
	}
	again, err := c.CreateSandbox(ctx, create, "lifecycle-1")
	if err != nil || again.Id != sb.Id {
		t.Fatalf("create with the same idempotency key: %v, %v (want %s)", again, err, sb.Id)
	}
	// The key used again for another request is refused, not answered with sb.
	if _, err := c.CreateSandbox(ctx, client.SandboxCreate{Placement: devhost()}, "lifecycle-1"); !client.IsCode(err, api.CodeIdempotencyKeyReused) {
		t.Fatalf("create with the key of another request: %v", err)
	}
	if sb, err = c.WaitForState(ctx, sb.Id, client.Running); err != nil {
		t.Fatal(err)
	}
	if sb.Pool == nil || *sb.Pool != "devhost" {
		t.Fatalf("placed on %v", sb.Pool)
	}

	got, err := c.GetSandbox(ctx, sb.Id)
	if err != nil || got.State != client.Running {
		t.Fatalf("get: %+v, %v", got, err)
	}
	list, err := c.ListSandboxes(ctx, &client.ListSandboxesParams{Label: &[]string{"team=client"}})
	if err != nil || len(list.Items) != 1 || list.Items[0].Id != sb.Id {
		t.Fatalf("list by label: %+v, %v", list, err)
	}
	patched, err := c.PatchSandbox(ctx, sb.Id, client.SandboxPatch{Labels: &map[string]string{"team": "patched"}})
	if err != nil || patched.Labels["team"] != "patched" {
		t.Fatalf("patch: %+v, %v", patched, err)
	}

	res, err := c.ExecSandbox(ctx, sb.Id, api.ExecRequest{Command: `echo "$GREETING"; exit 2`})
	if err != nil || res.Stdout != "hello\n" || res.ExitCode != 2 {
		t.Fatalf("exec: %+v, %v", res, err)
	}

	var stdout, stderr strings.Builder
	var final *api.ExecEvent
	for ev, err := range c.ExecSandboxStream(ctx, sb.Id, api.ExecRequest{Command: "echo one; echo two >&2; exit 3"}) {
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case ev.IsFinal():
			final = &ev
		case ev.Stream == api.StreamStdout:
			stdout.WriteString(ev.Data)
		case ev.Stream == api.StreamStderr:
			stderr.WriteString(ev.Data)
		}
	}
	if final == nil || *final.ExitCode != 3 || stdout.String() != "one\n" || stderr.String() != "two\n" {
		t.Fatalf("stream: final %+v, stdout %q, stderr %q", final, stdout.String(), stderr.String())
	}
	// Breaking out early closes the stream; the client stays usable afterwards.
	for ev, err := range c.ExecSandboxStream(ctx, sb.Id, api.ExecRequest{Command: "for i in 1 2 3 4 5; do echo $i; done"}) {
		if err != nil || ev.Data == "" {
			t.Fatalf("first event: %+v, %v", ev, err)
		}
		break
	}

	if err := c.WriteSandboxFile(ctx, sb.Id, "notes/a.txt", []byte("kept\n")); err != nil {
		t.Fatal(err)
	}
	data, err := c.ReadSandboxFile(ctx, sb.Id, "notes/a.txt")
	if err != nil || string(data) != "kept\n" {
		t.Fatalf("read: %q, %v", data, err)
	}
	files, err := c.ListSandboxFiles(ctx, sb.Id, "notes")
	if err != nil || !slices.ContainsFunc(files, func(f client.FileInfo) bool { return f.Name == "a.txt" }) {
		t.Fatalf("list files: %+v, %v", files, err)
	}

	if sb, err = c.StopSandbox(ctx, sb.Id); err != nil || sb.State != client.Stopped {
		t.Fatalf("stop: %+v, %v", sb, err)
	}
	var apiErr *client.APIError
	if _, err := c.ExecSandbox(ctx, sb.Id, api.ExecRequest{Command: "true"}); !errors.As(err, &apiErr) ||
		apiErr.Status != http.StatusConflict || apiErr.Code != api.CodeInvalidState || apiErr.Details["state"] != "stopped" {
		t.Fatalf("exec on a stopped sandbox: %v", err)
	}
	if sb, err = c.StartSandbox(ctx, sb.Id); err != nil || sb.State != client.Running {
		t.Fatalf("start: %+v, %v", sb, err)
	}

	snap, err := c.CreateSnapshot(ctx, sb.Id, "disk")
	if err != nil || snap.Kind != client.SnapshotKindDisk || snap.SandboxId != sb.Id {
		t.Fatalf("snapshot: %+v, %v", snap, err)
	}
	if got, err := c.GetSnapshot(ctx, snap.Id); err != nil || got.Id != snap.Id {
		t.Fatalf("get snapshot: %+v, %v", got, err)
	}
	fork, err := c.ForkSandbox(ctx, sb.Id, client.ForkRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if fork, err = c.WaitForState(ctx, fork.Id, client.Running); err != nil {
		t.Fatal(err)
	}
	if data, err := c.ReadSandboxFile(ctx, fork.Id, "notes/a.txt"); err != nil || string(data) != "kept\n" {
		t.Fatalf("fork's file: %q, %v", data, err)
	}

	for _, id := range []string{sb.Id, fork.Id} {
		if _, err := c.DeleteSandbox(ctx, id); err != nil {
			t.Fatal(err)
		}
		gone, err := c.WaitForState(ctx, id, client.Terminated)
		if err != nil || gone.State != client.Terminated {
			t.Fatalf("wait terminated: %+v, %v", gone, err)
		}
	}
	if err := c.DeleteSnapshot(ctx, snap.Id); err != nil && !client.IsNotFound(err) {
		t.Fatal(err)
	}
	if err := c.DeleteSnapshot(ctx, "snp_missing"); !client.IsNotFound(err) {
		t.Fatalf("deleting a missing snapshot: %v, want a 404", err)
	}

	// Waiting for running on a terminated sandbox fails at once, with the sandbox.
	sb2, err := c.WaitForState(ctx, sb.Id, client.Running)
	if !errors.Is(err, client.ErrTerminalState) || sb2 == nil || sb2.State != client.Terminated ||
		!strings.Contains(err.Error(), "terminated") {
		t.Fatalf("wait for running on a terminated sandbox: %+v, %v", sb2, err)
	}
}

// TestAPIErrors checks that refusals arrive as *APIError with status, code and details.
func TestAPIErrors(t *testing.T) {
	dd := startDaemon(t)
	c := dd.client(t)
	ctx := testCtx(t)

	var apiErr *client.APIError
	_, err := c.GetSandbox(ctx, "sbx_missing")
	if !errors.As(err, &apiErr) || apiErr.Status != http.StatusNotFound || apiErr.Code != api.CodeNotFound ||
		apiErr.Message == "" || !client.IsNotFound(err) {
		t.Fatalf("get a missing sandbox: %#v", err)
	}

	_, err = c.CreateSandbox(ctx, client.SandboxCreate{Capabilities: &[]string{"gpu"}}, "")
	if !errors.As(err, &apiErr) || apiErr.Status != http.StatusUnprocessableEntity ||
		apiErr.Code != api.CodeUnsupportedCapability || apiErr.Details["rejected"] == nil || client.IsNotFound(err) {
		t.Fatalf("create with gpu: %#v", err)
	}
	if !client.IsCode(err, api.CodeUnsupportedCapability) {
		t.Fatal("IsCode does not see the code")
	}

	sb, err := c.CreateSandbox(ctx, client.SandboxCreate{Placement: devhost()}, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitForState(ctx, sb.Id, client.Running); err != nil {
		t.Fatal(err)
	}
	_, err = c.PauseSandbox(ctx, sb.Id)
	if !errors.As(err, &apiErr) || apiErr.Status != http.StatusNotImplemented || apiErr.Code != api.CodeUnsupportedOperation ||
		apiErr.Details["operation"] != "pause" || apiErr.Details["pool"] != "devhost" || apiErr.Details["adapter"] != "devhost" {
		t.Fatalf("pause on devhost: %#v", err)
	}
	// Resuming what is not paused is a no-op that answers the sandbox as it is.
	if got, err := c.ResumeSandbox(ctx, sb.Id); err != nil || got.State != client.Running {
		t.Fatalf("resume a running sandbox: %+v, %v", got, err)
	}
	if !strings.Contains(apiErr.Error(), string(apiErr.Code)) {
		t.Fatalf("error text %q does not name the code", apiErr.Error())
	}

	// A wrong token is an API refusal too, and its text never carries the token.
	bad, err := client.New(dd.url, "wrong-secret")
	if err != nil {
		t.Fatal(err)
	}
	_, err = bad.GetSandbox(ctx, sb.Id)
	if !errors.As(err, &apiErr) || apiErr.Status != http.StatusUnauthorized || strings.Contains(err.Error(), "wrong-secret") {
		t.Fatalf("bad token: %v", err)
	}
}
