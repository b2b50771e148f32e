package adapterhttp

import (
	"github.com/different-ai/differently/internal/tracing"

	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/internal/safeurl"
)

// DefaultTimeout bounds one request of the default HTTP client. It is longer than the
// longest exec (api.MaxExecTimeoutSeconds) so that only the caller's context, which
// knows the exec's own timeout, cuts a command short.
const DefaultTimeout = 2*time.Hour + 15*time.Minute

// maxResponseJSON bounds a JSON answer. No limit of the contract covers responses; this
// one is far above any legitimate answer (a List of a very large installation) and
// keeps a broken plugin from exhausting memory.
const maxResponseJSON = 64 << 20

// Client is an adapters.ExecutionAdapter that talks to a Handler, or to any server of
// the protocol, over HTTP. It implements every optional interface: what the remote
// can actually do is what its /info declares, and it answers 501 for the rest.
// TTLRenewer too, in effect only when /info declares ttlRenewal: see RenewTTL.
type Client struct {
	base  string
	token string
	hc    *http.Client
	// redact keeps the token out of everything the remote says that the client
	// passes on: a plugin (or a proxy before it) may echo the request it got.
	redact *adapters.Redactor

	mu   sync.Mutex
	info adapters.Info
	// fetched is set once /info has answered; ttlRenewal is what it last declared.
	fetched    bool
	ttlRenewal bool
}

var (
	_ adapters.ExecutionAdapter = (*Client)(nil)
	_ adapters.Streamer         = (*Client)(nil)
	_ adapters.FileSystem       = (*Client)(nil)
	_ adapters.Lifecycle        = (*Client)(nil)
	_ adapters.Pauser           = (*Client)(nil)
	_ adapters.Snapshotter      = (*Client)(nil)
	_ adapters.PortExposer      = (*Client)(nil)
	_ adapters.TTLRenewer       = (*Client)(nil)
)

// Option configures a Client.
type Option func(*Client)

// WithHTTPClient replaces the default HTTP client (timeout DefaultTimeout, redirects
// not followed). Keep its timeout above the longest call you make.
func WithHTTPClient(hc *http.Client) Option {
	return func(c *Client) {
		if hc != nil {
			c.hc = hc
		}
	}
}

// NewClient returns a client for the server at baseURL (http://host:port, optionally
// with a path prefix); routes go under baseURL+BasePath. It does no I/O.
func NewClient(baseURL, token string, opts ...Option) (*Client, error) {
	u, err := url.Parse(baseURL)
	if err != nil {
		return nil, adapters.InvalidRequest("adapter endpoint %q is not a URL: %v", safeurl.Describe(baseURL), safeurl.Reason(err))
	}
	// The endpoint is quoted only through safeurl: credentials in it would end up in
	// error messages and logs.
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, adapters.InvalidRequest("adapter endpoint %q must be an http or https URL", safeurl.Describe(baseURL))
	case u.Host == "":
		return nil, adapters.InvalidRequest("adapter endpoint %q has no host", safeurl.Describe(baseURL))
	case u.User != nil:
		return nil, adapters.InvalidRequest("adapter endpoint must not contain credentials; pass a token")
	case u.RawQuery != "" || u.Fragment != "":
		return nil, adapters.InvalidRequest("adapter endpoint %q must not have a query or fragment", safeurl.Describe(baseURL))
	}
	c := &Client{
		base:  strings.TrimRight(u.String(), "/") + BasePath,
		token: token,
		hc: &http.Client{
			Timeout: DefaultTimeout,
			// A redirect would resend bodies and credentials somewhere the operator
			// did not configure; a plugin has no reason to redirect.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		info:   adapters.Info{Kind: "remote", Protocol: adapters.ProtocolVersion},
		redact: adapters.NewRedactor(token),
	}
	for _, o := range opts {
		o(c)
	}
	return c, nil
}

// request describes one call. body, when set, is sent with contentType.
type request struct {
	method      string
	path        string
	query       url.Values
	body        []byte
	contentType string
	// stream, when set instead of body, is sent as it is read (chunked), for file
	// content that need not be held whole.
	stream io.Reader
	accept string
}

// send performs r and returns the response only when it is a 2xx from a server
// speaking this protocol version; every other outcome is an error whose code the
// control plane can act on. The caller closes the body.
func (c *Client) send(ctx context.Context, r request) (*http.Response, error) {
	target := c.base + r.path
	if len(r.query) > 0 {
		target += "?" + r.query.Encode()
	}
	var body io.Reader
	if r.body != nil {
		body = bytes.NewReader(r.body)
	}
	if r.stream != nil {
		// Only io.NopCloser: NewRequest would take the length of a *bytes.Reader
		// and the like, and the request must not close the caller's reader.
		body = io.NopCloser(r.stream)
	}
	req, err := http.NewRequestWithContext(ctx, r.method, target, body)
	if err != nil {
		return nil, adapters.InvalidRequest("building the adapter request failed: %v", err)
	}
	if body != nil {
		req.Header.Set("Content-Type", r.contentType)
	}
	req.Header.Set("Accept", cmp.Or(r.accept, contentTypeJSON))
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if budget, ok := timeoutBudget(ctx); ok {
		req.Header.Set(TimeoutHeader, strconv.FormatInt(budget.Milliseconds(), 10))
	}
	// The caller's span, if any, goes on in the plugin's (traceparent).
	tracing.Inject(ctx, req.Header)
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, c.transportError(ctx, r, err)
	}
	ok := resp.StatusCode >= 200 && resp.StatusCode <= 299
	version := resp.Header.Get(ProtocolHeader)
	if version == "" && !ok {
		// Most likely a proxy in front of the plugin failed; its status says more than
		// the missing header.
		discard(resp)
		return nil, adapters.Unavailable("adapter answered %s to %s %s, without a %s header (a proxy in between?)",
			resp.Status, r.method, r.path, ProtocolHeader)
	}
	if err := checkProtocol(version); err != nil {
		discard(resp)
		return nil, c.redact.Error(err)
	}
	if !ok {
		defer discard(resp)
		return nil, c.redact.Error(responseError(r, resp))
	}
	return resp, nil
}

// transportError keeps the context's error in the chain, so a caller can tell its own
// cancellation from an outage with errors.Is, while the code still says the remote
// could not be reached.
func (c *Client) transportError(ctx context.Context, r request, err error) error {
	e := c.redact.Error(adapters.Unavailable("adapter request %s %s failed: %v", r.method, r.path, err))
	if ctxErr := ctx.Err(); ctxErr != nil {
		return fmt.Errorf("%w: %w", e, ctxErr)
	}
	return e
}

func checkProtocol(got string) *api.Error {
	if got == adapters.ProtocolVersion {
		return nil
	}
	if got == "" {
		return adapters.Unavailable("adapter protocol mismatch: the server sent no %s header (is it a Differently adapter?), this client speaks %q",
			ProtocolHeader, adapters.ProtocolVersion)
	}
	return adapters.Unavailable("adapter protocol mismatch: server speaks %q, this client speaks %q", got, adapters.ProtocolVersion)
}

// timeoutBudget is how long the plugin may work on a request whose context has a
// deadline: the time left, less a margin for the answer to travel back. The plugin
// then meets its own deadline first and answers what it makes of it (a sandbox still
// starting is sandbox_failed), where a request cut by ours would be an outage of the
// pool.
func timeoutBudget(ctx context.Context) (time.Duration, bool) {
	dl, ok := ctx.Deadline()
	if !ok {
		return 0, false
	}
	left := time.Until(dl)
	left -= min(left/10, 2*time.Second)
	return max(left, time.Millisecond), true
}

// responseError reads the error envelope of a non-2xx answer. Without one, the status
// is all there is, and the body is not quoted: it may come from a proxy and say
// anything.
func responseError(r request, resp *http.Response) *api.Error {
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, api.MaxJSONBodyBytes))
	var env api.ErrorEnvelope
	if json.Unmarshal(raw, &env) != nil || env.Error == nil || env.Error.Code == "" {
		return adapters.Unavailable("adapter answered %s to %s %s", resp.Status, r.method, r.path)
	}
	e := env.Error
	switch e.Code {
	case api.CodeUnauthenticated, api.CodeForbidden:
		// The adapter rejecting our credentials is a pool outage, not the tenant's
		// mistake, as for every provider adapter.
		return adapters.Unavailable("adapter rejected the credentials (%s: %s)", e.Code, e.Message).
			WithDetail("adapterCode", string(e.Code))
	}
	return e
}

// discard drains a little of the body so the connection can be reused, then closes it.
func discard(resp *http.Response) {
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
}

// call sends in as JSON (when not nil) and decodes the answer into out (when not nil).
func (c *Client) call(ctx context.Context, method, path string, query url.Values, in, out any) error {
	r := request{method: method, path: path, query: query}
	if in != nil {
		body, err := jsonBody(in)
		if err != nil {
			return err
		}
		r.body, r.contentType = body, contentTypeJSON
	}
	resp, err := c.send(ctx, r)
	if err != nil {
		return err
	}
	defer discard(resp)
	if out == nil {
		return nil
	}
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseJSON+1))
	if err != nil {
		return c.transportError(ctx, r, err)
	}
	if len(raw) > maxResponseJSON {
		return adapters.Unavailable("adapter answer to %s %s is over %d MiB", method, path, maxResponseJSON>>20)
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return c.redact.Error(adapters.Unavailable("adapter answered %s %s with malformed JSON: %v", method, path, err))
	}
	return nil
}

// jsonBody encodes a request body. The server would refuse one over the limit after
// reading it all; refusing here saves the upload and gives the same code.
func jsonBody(in any) ([]byte, error) {
	body, err := json.Marshal(in)
	if err != nil {
		return nil, adapters.InvalidRequest("encoding the request failed: %v", err)
	}
	if len(body) > api.MaxJSONBodyBytes {
		return nil, jsonTooLarge()
	}
	return body, nil
}

func instancePath(ref string, rest ...string) (string, error) {
	if ref == "" {
		return "", adapters.InvalidRequest("instance ref is empty")
	}
	// Refs are opaque: escaping lets one contain a slash without changing the route.
	p := "/instances/" + pathSegment(ref)
	for _, s := range rest {
		p += "/" + s
	}
	return p, nil
}

// pathSegment escapes an opaque ref as one path segment. A ref of "." or ".." is
// escaped too: left as is, the server's path cleaning would redirect the request
// elsewhere instead of serving it.
func pathSegment(ref string) string {
	switch ref {
	case ".":
		return "%2E"
	case "..":
		return "%2E%2E"
	}
	return url.PathEscape(ref)
}

func fileQuery(path string) (url.Values, error) {
	if path == "" {
		return nil, adapters.InvalidRequest("file path is empty")
	}
	return url.Values{"path": {path}}, nil
}
