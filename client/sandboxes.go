package client

import (
	"bytes"
	"context"
	"fmt"
	"io"

	"github.com/different-ai/differently/api"
)

// CreateSandbox asks for a sandbox; it is usually still queued or provisioning when
// this returns (use WaitForState, or CreateSandboxAndWait). With a non-empty
// idempotencyKey the daemon answers a repeated create with the same sandbox, which is
// also what makes the call safe to retry.
func (c *Client) CreateSandbox(ctx context.Context, body SandboxCreate, idempotencyKey string) (*Sandbox, error) {
	var params CreateSandboxParams
	if idempotencyKey != "" {
		params.IdempotencyKey = &idempotencyKey
	}
	return decode[Sandbox](c.API.ClientInterface.CreateSandbox(ctx, &params, body))
}

// CreateSandboxAndWait creates a sandbox and waits until it is running, like
// CreateSandbox followed by WaitForState(Running), with the errors of both. The
// create itself asks the daemon to answer once the sandbox runs (Prefer: wait), so
// a sandbox that starts within the first wait costs one request. When that answer
// does not come in time (a transport's ResponseHeaderTimeout, say), the create is
// sent again without Prefer if idempotencyKey makes that safe, and fails otherwise.
func (c *Client) CreateSandboxAndWait(ctx context.Context, body SandboxCreate, idempotencyKey string) (*Sandbox, error) {
	params := CreateSandboxParams{Prefer: c.preferWait(ctx)}
	if idempotencyKey != "" {
		params.IdempotencyKey = &idempotencyKey
	}
	sb, err := decode[Sandbox](c.API.ClientInterface.CreateSandbox(ctx, &params, body))
	if err != nil && idempotencyKey != "" && timedOut(ctx, err) {
		// The key gives back the sandbox the first request made, if it made one;
		// without Prefer the answer comes at once, and the wait goes on below.
		params.Prefer = nil
		sb, err = decode[Sandbox](c.API.ClientInterface.CreateSandbox(ctx, &params, body))
	}
	if err != nil {
		return nil, err
	}
	return c.settle(ctx, sb, Running)
}

// GetSandbox returns one sandbox.
func (c *Client) GetSandbox(ctx context.Context, id string) (*Sandbox, error) {
	return decode[Sandbox](c.API.ClientInterface.GetSandbox(ctx, id))
}

// ListSandboxes returns one page; pass NextCursor back as params.Cursor for the next.
func (c *Client) ListSandboxes(ctx context.Context, params *ListSandboxesParams) (*SandboxList, error) {
	return decode[SandboxList](c.API.ClientInterface.ListSandboxes(ctx, params))
}

// PatchSandbox changes labels or the TTL.
func (c *Client) PatchSandbox(ctx context.Context, id string, body SandboxPatch) (*Sandbox, error) {
	return decode[Sandbox](c.API.ClientInterface.PatchSandbox(ctx, id, body))
}

// DeleteSandbox starts terminating a sandbox and returns it as it is now; wait for
// Terminated to know it is gone (or use DeleteSandboxAndWait).
func (c *Client) DeleteSandbox(ctx context.Context, id string) (*Sandbox, error) {
	return decode[Sandbox](c.API.ClientInterface.DeleteSandbox(ctx, id, nil))
}

// DeleteSandboxAndWait deletes a sandbox and waits until it is gone, like
// DeleteSandbox followed by WaitForState(Terminated, Failed): a failed sandbox is
// gone as far as the caller is concerned, since the daemon keeps it failed (a delete
// answers it unchanged, and the reconciler removes any instance left behind). Both
// come back with a nil error; the returned State tells them apart. The delete itself
// asks the daemon to answer once the sandbox is gone (Prefer: wait), so a prompt
// backend costs one request. When that answer does not come in time (a transport's
// ResponseHeaderTimeout, say), the delete, idempotent, is sent again without Prefer.
func (c *Client) DeleteSandboxAndWait(ctx context.Context, id string) (*Sandbox, error) {
	sb, err := decode[Sandbox](c.API.ClientInterface.DeleteSandbox(ctx, id, &DeleteSandboxParams{Prefer: c.preferWait(ctx)}))
	if err != nil && timedOut(ctx, err) {
		sb, err = decode[Sandbox](c.API.ClientInterface.DeleteSandbox(ctx, id, nil))
	}
	if err != nil {
		return nil, err
	}
	return c.settle(ctx, sb, Terminated, Failed)
}

// ExecSandbox runs a command and returns its result; a non-zero exit is a result, not an
// error. It is never retried, since a command may not be safe to run twice.
func (c *Client) ExecSandbox(ctx context.Context, id string, req api.ExecRequest) (*api.ExecResult, error) {
	return decode[api.ExecResult](c.API.ClientInterface.ExecSandbox(ctx, id, nil, req))
}

// ReadSandboxFile returns a file's bytes (at most api.MaxFileBytes).
func (c *Client) ReadSandboxFile(ctx context.Context, id, path string) ([]byte, error) {
	resp, err := c.API.ClientInterface.ReadSandboxFile(ctx, id, &ReadSandboxFileParams{Path: path})
	if err != nil {
		return nil, transportError(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return nil, newAPIError(resp)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, api.MaxFileBytes+1))
	if err != nil {
		return nil, transportError(err)
	}
	if len(data) > api.MaxFileBytes {
		return nil, fmt.Errorf("differently: file %s is over %d bytes", path, api.MaxFileBytes)
	}
	return data, nil
}

// WriteSandboxFile creates or replaces a file. A PUT of the same bytes is idempotent, so it
// is retried like the other idempotent calls.
func (c *Client) WriteSandboxFile(ctx context.Context, id, path string, data []byte) error {
	return expectOK(c.API.ClientInterface.WriteSandboxFileWithBody(ctx, id,
		&WriteSandboxFileParams{Path: path}, "application/octet-stream", bytes.NewReader(data)))
}

// ListSandboxFiles returns a directory's entries.
func (c *Client) ListSandboxFiles(ctx context.Context, id, path string) ([]FileInfo, error) {
	l, err := decode[FileList](c.API.ClientInterface.ListSandboxFiles(ctx, id, &ListSandboxFilesParams{Path: path}))
	if err != nil {
		return nil, err
	}
	return l.Items, nil
}

// StopSandbox stops a running sandbox, keeping its disk.
func (c *Client) StopSandbox(ctx context.Context, id string) (*Sandbox, error) {
	return decode[Sandbox](c.API.ClientInterface.StopSandbox(ctx, id))
}

// StartSandbox starts a stopped sandbox.
func (c *Client) StartSandbox(ctx context.Context, id string) (*Sandbox, error) {
	return decode[Sandbox](c.API.ClientInterface.StartSandbox(ctx, id))
}

// PauseSandbox freezes a sandbox; pools whose adapter cannot pause answer 501
// unsupported_operation.
func (c *Client) PauseSandbox(ctx context.Context, id string) (*Sandbox, error) {
	return decode[Sandbox](c.API.ClientInterface.PauseSandbox(ctx, id))
}

// ResumeSandbox unfreezes a paused sandbox.
func (c *Client) ResumeSandbox(ctx context.Context, id string) (*Sandbox, error) {
	return decode[Sandbox](c.API.ClientInterface.ResumeSandbox(ctx, id))
}

// CreateSnapshot snapshots a sandbox; kind is "disk" or "memory", or "" for the
// daemon's default.
func (c *Client) CreateSnapshot(ctx context.Context, id string, kind string) (*Snapshot, error) {
	var body SnapshotCreate
	if kind != "" {
		body.Kind = ptr(SnapshotCreateKind(kind))
	}
	return decode[Snapshot](c.API.ClientInterface.CreateSnapshot(ctx, id, body))
}

// ListAllSnapshots returns one page of the snapshots the token may see, oldest
// first; pass NextCursor back as params.Cursor for the next.
func (c *Client) ListAllSnapshots(ctx context.Context, params *ListAllSnapshotsParams) (*SnapshotList, error) {
	return decode[SnapshotList](c.API.ClientInterface.ListAllSnapshots(ctx, params))
}

// ListSnapshots returns the snapshots of one sandbox, ordered by ID; those of a
// terminated sandbox stay until they are deleted.
func (c *Client) ListSnapshots(ctx context.Context, sandboxID string) ([]Snapshot, error) {
	l, err := decode[SnapshotList](c.API.ClientInterface.ListSnapshots(ctx, sandboxID))
	if err != nil {
		return nil, err
	}
	return l.Items, nil
}

// GetSnapshot returns one snapshot.
func (c *Client) GetSnapshot(ctx context.Context, snapID string) (*Snapshot, error) {
	return decode[Snapshot](c.API.ClientInterface.GetSnapshot(ctx, snapID))
}

// DeleteSnapshot deletes a snapshot. A snapshot already gone is a 404 APIError;
// callers that want "delete if present" check IsNotFound. A retry after a connection
// broke before the answer that finds it gone is success: the first attempt deleted
// it.
func (c *Client) DeleteSnapshot(ctx context.Context, snapID string) error {
	return expectDeleted(c.API.ClientInterface.DeleteSnapshot(ctx, snapID))
}

// ForkSandbox creates a new sandbox from a snapshot of id.
func (c *Client) ForkSandbox(ctx context.Context, id string, body ForkRequest) (*Sandbox, error) {
	return decode[Sandbox](c.API.ClientInterface.ForkSandbox(ctx, id, body))
}
