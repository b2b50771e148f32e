package client

import (
	"context"
	"iter"

	"github.com/different-ai/differently/api"
)

// The names below are the ones the client had before its methods were named after
// the API operation they call (the operationId in api/openapi.yaml, which the
// low-level client in Client.API is named after too). They stay so that code written
// against them keeps building; each only calls its new name.

// Exec runs a command and returns its result.
//
// Deprecated: use ExecSandbox.
func (c *Client) Exec(ctx context.Context, id string, req api.ExecRequest) (*api.ExecResult, error) {
	return c.ExecSandbox(ctx, id, req)
}

// ExecStream runs a command and yields its events as they arrive.
//
// Deprecated: use ExecSandboxStream.
func (c *Client) ExecStream(ctx context.Context, id string, req api.ExecRequest) iter.Seq2[api.ExecEvent, error] {
	return c.ExecSandboxStream(ctx, id, req)
}

// ReadFile returns a file's bytes.
//
// Deprecated: use ReadSandboxFile.
func (c *Client) ReadFile(ctx context.Context, id, path string) ([]byte, error) {
	return c.ReadSandboxFile(ctx, id, path)
}

// WriteFile creates or replaces a file.
//
// Deprecated: use WriteSandboxFile.
func (c *Client) WriteFile(ctx context.Context, id, path string, data []byte) error {
	return c.WriteSandboxFile(ctx, id, path, data)
}

// ListFiles returns a directory's entries.
//
// Deprecated: use ListSandboxFiles.
func (c *Client) ListFiles(ctx context.Context, id, path string) ([]FileInfo, error) {
	return c.ListSandboxFiles(ctx, id, path)
}

// Stop stops a running sandbox.
//
// Deprecated: use StopSandbox.
func (c *Client) Stop(ctx context.Context, id string) (*Sandbox, error) {
	return c.StopSandbox(ctx, id)
}

// Start starts a stopped sandbox.
//
// Deprecated: use StartSandbox.
func (c *Client) Start(ctx context.Context, id string) (*Sandbox, error) {
	return c.StartSandbox(ctx, id)
}

// Pause freezes a sandbox.
//
// Deprecated: use PauseSandbox.
func (c *Client) Pause(ctx context.Context, id string) (*Sandbox, error) {
	return c.PauseSandbox(ctx, id)
}

// Resume unfreezes a paused sandbox.
//
// Deprecated: use ResumeSandbox.
func (c *Client) Resume(ctx context.Context, id string) (*Sandbox, error) {
	return c.ResumeSandbox(ctx, id)
}

// Fork creates a new sandbox from a snapshot of id.
//
// Deprecated: use ForkSandbox.
func (c *Client) Fork(ctx context.Context, id string, body ForkRequest) (*Sandbox, error) {
	return c.ForkSandbox(ctx, id, body)
}

// TrustReport says, pool by pool, where work may go under the current policy.
//
// Deprecated: use GetTrustReport.
func (c *Client) TrustReport(ctx context.Context) (*TrustReport, error) {
	return c.GetTrustReport(ctx)
}

// Reconcile runs one reconciliation of every pool now.
//
// Deprecated: use ReconcileNow.
func (c *Client) Reconcile(ctx context.Context) (*ReconcileReport, error) {
	return c.ReconcileNow(ctx)
}
