package adapterhttp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/internal/textcut"
)

// Info returns what the last Capabilities or Refresh fetched, or a placeholder of kind
// "remote" before the first fetch: Info must not do I/O.
func (c *Client) Info() adapters.Info {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.info
}

// Refresh fetches /info so that Info describes the remote adapter.
func (c *Client) Refresh(ctx context.Context) error {
	_, err := c.Capabilities(ctx)
	return err
}

// Capabilities fetches /info. The features are already filtered by the remote
// handler; filtering again here only drops names this build does not know.
func (c *Client) Capabilities(ctx context.Context) (adapters.Capabilities, error) {
	var out infoResponse
	if err := c.call(ctx, http.MethodGet, "/info", nil, nil, &out); err != nil {
		return adapters.Capabilities{}, err
	}
	// The header said the right version; a body that disagrees comes from a server
	// that is not what it claims, and nothing it says can be trusted.
	if out.Info.Protocol != adapters.ProtocolVersion {
		return adapters.Capabilities{}, adapters.Unavailable(
			"adapter protocol mismatch: server speaks %q, this client speaks %q (info.protocol)",
			out.Info.Protocol, adapters.ProtocolVersion)
	}
	info := out.Info
	for _, f := range []*string{&info.Kind, &info.Version, &info.Isolation, &info.Description} {
		*f = c.redact.String(*f)
	}
	c.mu.Lock()
	c.info = info
	c.fetched, c.ttlRenewal = true, out.TTLRenewal
	c.mu.Unlock()
	caps := out.Capabilities
	caps.Features = adapters.EffectiveFeatures(c, caps.Features)
	return caps, nil
}

// Capacity fetches /capacity.
func (c *Client) Capacity(ctx context.Context) (adapters.Capacity, error) {
	var out adapters.Capacity
	err := c.call(ctx, http.MethodGet, "/capacity", nil, nil, &out)
	return out, err
}

// Health probes /health; any failure to get a 2xx is the pool's health error.
func (c *Client) Health(ctx context.Context) error {
	return c.call(ctx, http.MethodGet, "/health", nil, nil, nil)
}

// Create never retries: a lost answer surfaces as provider_unavailable, and the
// caller's retry finds the instance because the remote is idempotent on req.ID.
func (c *Client) Create(ctx context.Context, req adapters.CreateRequest) (adapters.Instance, error) {
	var out adapters.Instance
	err := c.call(ctx, http.MethodPost, "/instances", nil, req, &out)
	out.Message = c.redact.String(out.Message)
	return out, err
}

// Get fetches one instance; a missing one is not_found.
func (c *Client) Get(ctx context.Context, ref string) (adapters.Instance, error) {
	var out adapters.Instance
	p, err := instancePath(ref)
	if err != nil {
		return out, err
	}
	err = c.call(ctx, http.MethodGet, p, nil, nil, &out)
	out.Message = c.redact.String(out.Message)
	return out, err
}

// List fails as a whole when the remote does: a partial list would make the
// reconciler delete or fail sandboxes it merely could not see.
func (c *Client) List(ctx context.Context, installation string) ([]adapters.Instance, error) {
	if installation == "" {
		return nil, adapters.InvalidRequest("installation is empty")
	}
	var out []adapters.Instance
	if err := c.call(ctx, http.MethodGet, "/instances", url.Values{"installation": {installation}}, nil, &out); err != nil {
		return nil, err
	}
	if out == nil {
		// null is not the empty list: taken for one, it would fail every sandbox of
		// the pool as lost.
		return nil, adapters.Unavailable("remote adapter answered List with null instead of a list of instances")
	}
	for i := range out {
		out[i].Message = c.redact.String(out[i].Message)
	}
	return out, nil
}

// Delete succeeds for a missing instance, whatever the remote says, because the
// scheduler retries a failed Delete forever.
func (c *Client) Delete(ctx context.Context, ref string) error {
	p, err := instancePath(ref)
	if err != nil {
		return err
	}
	return ignoreNotFound(c.call(ctx, http.MethodDelete, p, nil, nil, nil))
}

// ignoreNotFound takes a not_found from a delete for success, as the protocol says a
// plugin may answer for what is already gone; but not one that says the path is no
// route at all, which is a misconfigured endpoint with the instance still running.
func ignoreNotFound(err error) error {
	if !api.IsCode(err, api.CodeNotFound) {
		return err
	}
	if e := api.AsError(err); e.Details[NoRouteDetail] == true {
		return adapters.Unavailable("the adapter has no such route (%s): is the pool's endpoint the adapter's root?", e.Message)
	}
	return nil
}

// Exec runs a command to completion. Only the caller's context bounds how long it
// waits, beyond the HTTP client's own timeout.
func (c *Client) Exec(ctx context.Context, ref string, req api.ExecRequest) (api.ExecResult, error) {
	var out api.ExecResult
	p, err := instancePath(ref, "exec")
	if err != nil {
		return out, err
	}
	err = c.call(ctx, http.MethodPost, p, nil, req, &out)
	// The contract caps each stream at MaxExecOutputBytes; a plugin that sends more
	// must not hand a tenant more than any other adapter would.
	out.Stdout, out.Truncated = capOutput(out.Stdout, out.Truncated)
	out.Stderr, out.Truncated = capOutput(out.Stderr, out.Truncated)
	return out, err
}

// capOutput cuts s to the contract's output cap, on a character boundary, and
// reports whether anything of the stream was ever dropped.
func capOutput(s string, truncated bool) (string, bool) {
	if len(s) <= api.MaxExecOutputBytes {
		return s, truncated
	}
	return textcut.Prefix(s, api.MaxExecOutputBytes), true
}

// ExecStream runs a streamed exec. A failure the remote reports after the stream
// started arrives without its code and is returned as provider_unavailable.
func (c *Client) ExecStream(ctx context.Context, ref string, req api.ExecRequest, emit func(api.ExecEvent) error) (adapters.ExitStatus, error) {
	p, err := instancePath(ref, "exec")
	if err != nil {
		return adapters.ExitStatus{}, err
	}
	body, err := jsonBody(req)
	if err != nil {
		return adapters.ExitStatus{}, err
	}
	r := request{method: http.MethodPost, path: p, query: url.Values{"stream": {"1"}},
		body: body, contentType: contentTypeJSON, accept: contentTypeNDJSON}
	resp, err := c.send(ctx, r)
	if err != nil {
		return adapters.ExitStatus{}, err
	}
	// Closing unblocks the read and drops the connection, which cancels the command
	// on the remote when emit fails or the caller gives up.
	defer resp.Body.Close()
	// A server that ignored ?stream=1 would answer an ExecResult, which parses as a
	// final event and would lose all output.
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, contentTypeNDJSON) {
		return adapters.ExitStatus{}, adapters.Unavailable("adapter answered a streamed exec with content type %q, not %s", ct, contentTypeNDJSON)
	}
	st, err := readStream(resp.Body, emit)
	if e, ok := err.(*api.Error); ok {
		// A final {"error": ...} line is the remote's words.
		err = c.redact.Error(e)
	}
	if ctxErr := ctx.Err(); ctxErr != nil && api.IsCode(err, api.CodeProviderUnavailable) {
		return st, fmt.Errorf("%w: %w", err, ctxErr)
	}
	return st, err
}

// ReadFile fails with payload_too_large rather than return a cut file.
func (c *Client) ReadFile(ctx context.Context, ref, path string) ([]byte, error) {
	p, err := instancePath(ref, "files", "content")
	if err != nil {
		return nil, err
	}
	q, err := fileQuery(path)
	if err != nil {
		return nil, err
	}
	r := request{method: http.MethodGet, path: p, query: q, accept: contentTypeBytes}
	resp, err := c.send(ctx, r)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.ContentLength > api.MaxFileBytes {
		return nil, fileTooLarge()
	}
	var buf bytes.Buffer
	// Sized ahead on the plugin's word only up to a MiB: a Content-Length of 100 MiB
	// whose body never comes would otherwise be allocated at once.
	if resp.ContentLength > 0 {
		buf.Grow(int(min(resp.ContentLength, 1<<20)))
	}
	// One byte more than allowed tells an oversized file from one of exactly the limit
	// without reading the rest.
	if _, err := buf.ReadFrom(io.LimitReader(resp.Body, api.MaxFileBytes+1)); err != nil {
		return nil, c.transportError(ctx, r, err)
	}
	if buf.Len() > api.MaxFileBytes {
		return nil, fileTooLarge()
	}
	return buf.Bytes(), nil
}

// WriteFile refuses content over api.MaxFileBytes before sending it.
func (c *Client) WriteFile(ctx context.Context, ref, path string, data []byte) error {
	p, err := instancePath(ref, "files", "content")
	if err != nil {
		return err
	}
	q, err := fileQuery(path)
	if err != nil {
		return err
	}
	if len(data) > api.MaxFileBytes {
		return fileTooLarge()
	}
	if data == nil {
		data = []byte{}
	}
	resp, err := c.send(ctx, request{method: http.MethodPut, path: p, query: q, body: data, contentType: contentTypeBytes})
	if err != nil {
		return err
	}
	discard(resp)
	return nil
}

// OpenFile implements adapters.FileStreamer: the answer's body, which fails rather
// than ends should it go past api.MaxFileBytes.
func (c *Client) OpenFile(ctx context.Context, ref, path string) (io.ReadCloser, int64, error) {
	p, err := instancePath(ref, "files", "content")
	if err != nil {
		return nil, 0, err
	}
	q, err := fileQuery(path)
	if err != nil {
		return nil, 0, err
	}
	r := request{method: http.MethodGet, path: p, query: q, accept: contentTypeBytes}
	resp, err := c.send(ctx, r)
	if err != nil {
		return nil, 0, err
	}
	if resp.ContentLength > api.MaxFileBytes {
		discard(resp)
		return nil, 0, fileTooLarge()
	}
	body := &transportReader{c: c, ctx: ctx, r: r, body: resp.Body}
	return adapters.CapFile(body, "file "+path), resp.ContentLength, nil
}

// transportReader gives a broken answer body the code of every other transport
// failure.
type transportReader struct {
	c    *Client
	ctx  context.Context
	r    request
	body io.ReadCloser
}

func (t *transportReader) Read(p []byte) (int, error) {
	n, err := t.body.Read(p)
	if err != nil && !errors.Is(err, io.EOF) {
		err = t.c.transportError(t.ctx, t.r, err)
	}
	return n, err
}

func (t *transportReader) Close() error { return t.body.Close() }

// WriteFileFrom implements adapters.FileStreamer: content is sent as it is read.
// A failure to read it aborts the request, so the plugin writes nothing, and is
// returned wrapped as it is.
func (c *Client) WriteFileFrom(ctx context.Context, ref, path string, content io.Reader) error {
	p, err := instancePath(ref, "files", "content")
	if err != nil {
		return err
	}
	q, err := fileQuery(path)
	if err != nil {
		return err
	}
	src := &sourceReader{r: io.LimitReader(content, api.MaxFileBytes+1)}
	resp, err := c.send(ctx, request{method: http.MethodPut, path: p, query: q, stream: src, contentType: contentTypeBytes})
	n, readErr := src.state()
	switch {
	case readErr != nil:
		if err == nil {
			discard(resp)
		}
		return fmt.Errorf("reading the file content: %w", readErr)
	case n > api.MaxFileBytes:
		// The plugin refuses it too; this answer does not depend on its doing so.
		if err == nil {
			discard(resp)
		}
		return fileTooLarge()
	case err != nil:
		return err
	}
	discard(resp)
	return nil
}

// sourceReader keeps the caller's reader's failure apart from the transport's. The
// transport reads it from a goroutine of its own, which may still be at it when the
// answer comes, hence the lock.
type sourceReader struct {
	r io.Reader

	mu  sync.Mutex
	n   int64
	err error
}

func (s *sourceReader) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n += int64(n)
	if err != nil && !errors.Is(err, io.EOF) {
		s.err = err
	}
	return n, err
}

func (s *sourceReader) state() (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n, s.err
}

// ListFiles lists one directory.
func (c *Client) ListFiles(ctx context.Context, ref, path string) ([]adapters.FileInfo, error) {
	p, err := instancePath(ref, "files")
	if err != nil {
		return nil, err
	}
	q, err := fileQuery(path)
	if err != nil {
		return nil, err
	}
	var out []adapters.FileInfo
	if err := c.call(ctx, http.MethodGet, p, q, nil, &out); err != nil {
		return nil, err
	}
	return out, nil
}

func (c *Client) action(ctx context.Context, ref, action string) error {
	p, err := instancePath(ref, action)
	if err != nil {
		return err
	}
	return c.call(ctx, http.MethodPost, p, nil, nil, nil)
}

// Stop, Start, Pause and Resume post the action; the remote answers 501 when it
// cannot do it.
func (c *Client) Stop(ctx context.Context, ref string) error   { return c.action(ctx, ref, "stop") }
func (c *Client) Start(ctx context.Context, ref string) error  { return c.action(ctx, ref, "start") }
func (c *Client) Pause(ctx context.Context, ref string) error  { return c.action(ctx, ref, "pause") }
func (c *Client) Resume(ctx context.Context, ref string) error { return c.action(ctx, ref, "resume") }

// Snapshot captures an instance; restore it with CreateRequest.FromSnapshot.
func (c *Client) Snapshot(ctx context.Context, ref string, kind adapters.SnapshotKind) (adapters.Snapshot, error) {
	var out adapters.Snapshot
	p, err := instancePath(ref, "snapshots")
	if err != nil {
		return out, err
	}
	err = c.call(ctx, http.MethodPost, p, nil, snapshotRequest{Kind: kind}, &out)
	return out, err
}

// DeleteSnapshot succeeds for a missing snapshot, as the contract requires.
func (c *Client) DeleteSnapshot(ctx context.Context, snapshotRef string) error {
	if snapshotRef == "" {
		return adapters.InvalidRequest("snapshot ref is empty")
	}
	return ignoreNotFound(c.call(ctx, http.MethodDelete, "/snapshots/"+pathSegment(snapshotRef), nil, nil, nil))
}

// ExposePort asks for a URL reaching a guest port.
func (c *Client) ExposePort(ctx context.Context, ref string, port int) (string, error) {
	p, err := instancePath(ref, "ports")
	if err != nil {
		return "", err
	}
	var out portResponse
	if err := c.call(ctx, http.MethodPost, p, nil, portRequest{Port: port}, &out); err != nil {
		return "", err
	}
	return out.URL, nil
}

// RenewTTL moves the remote backend's expiry of an instance (POST
// /instances/{ref}/ttl) when the plugin declares ttlRenewal in /info, as of the last
// Capabilities or Refresh; before the first, it fetches /info. A plugin that does not
// declare it keeps no expiry of its own, as an in-process adapter without TTLRenewer,
// so there is nothing to move and RenewTTL succeeds without a request.
func (c *Client) RenewTTL(ctx context.Context, ref string, ttlSeconds int64) error {
	p, err := instancePath(ref, "ttl")
	if err != nil {
		return err
	}
	if ttlSeconds < 0 {
		return adapters.InvalidRequest("ttlSeconds must not be negative, not %d", ttlSeconds)
	}
	c.mu.Lock()
	fetched, declared := c.fetched, c.ttlRenewal
	c.mu.Unlock()
	if !fetched {
		if err := c.Refresh(ctx); err != nil {
			return err
		}
		c.mu.Lock()
		declared = c.ttlRenewal
		c.mu.Unlock()
	}
	if !declared {
		return nil
	}
	return c.call(ctx, http.MethodPost, p, nil, ttlRequest{TTLSeconds: &ttlSeconds}, nil)
}

// String names the endpoint for logs; the token is never part of it.
func (c *Client) String() string { return "adapterhttp.Client(" + c.base + ")" }

var _ adapters.FileStreamer = (*Client)(nil)
