// Package httpx is the HTTP plumbing shared by the adapters of hosted and
// self-hosted providers (opensandbox, daytona, freestyle): JSON calls bounded by the
// caller's context, and the one mapping from provider HTTP answers to the contract's
// error codes.
//
// The mapping follows the adapter specification: 404 is not_found, 429
// insufficient_capacity, 409 invalid_state, 400 and 422 invalid_request, 401 and 403
// provider_unavailable ("credentials were rejected", never echoing the key), and every
// other status or transport failure provider_unavailable. Adapters refine it where a
// provider means something else by a status (a 409 on create that means "exists"), or
// name the messages by which it means something its status does not say
// (WithMessageCode: "no room" under a 403, say).
package httpx

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/internal/safeurl"
	"github.com/different-ai/differently/internal/textcut"
)

// Limits on what is read from a provider.
const (
	// MaxErrorBody bounds the part of an error answer read for its message.
	MaxErrorBody = 64 << 10
	// MaxJSONBody bounds a JSON answer (a page of a listing, say).
	MaxJSONBody = 64 << 20
)

// Client calls one provider's HTTP API.
type Client struct {
	// Provider names the backend in error messages ("opensandbox").
	Provider string
	base     *url.URL
	http     *http.Client
	// authorize adds credentials to a request.
	authorize func(*http.Request)
	// redact scrubs the credentials from every error message.
	redact adapters.Redactor
	// rules recognise the messages by which a provider means something its status
	// does not say (WithMessageCode), tried in order.
	rules []messageRule
	// maxJSON bounds a JSON answer read whole (MaxJSONBody unless set).
	maxJSON int64
}

// messageRule gives code to an answer with one of statuses whose message matches re.
type messageRule struct {
	code     api.Code
	re       *regexp.Regexp
	statuses []int
}

// Option configures a Client.
type Option func(*Client)

// WithHTTPClient replaces the default http.Client (no overall timeout: calls are
// bounded by their context; redirects are not followed, so credentials never go
// elsewhere).
func WithHTTPClient(h *http.Client) Option { return func(c *Client) { c.http = h } }

// WithMaxJSONBody bounds the JSON answers read whole (MaxJSONBody by default).
// Tests lower it to go over it with little data.
func WithMaxJSONBody(n int64) Option { return func(c *Client) { c.maxJSON = n } }

// WithHeader sends a header on every request; its value is treated as a secret.
func WithHeader(name, value string) Option {
	return func(c *Client) {
		prev := c.authorize
		c.authorize = func(r *http.Request) {
			if prev != nil {
				prev(r)
			}
			r.Header.Set(name, value)
		}
		c.redact.Add(value)
	}
}

// WithBearer sends Authorization: Bearer token on every request.
func WithBearer(token string) Option {
	return func(c *Client) {
		WithHeader("Authorization", "Bearer "+token)(c)
		c.redact.Add(token)
	}
}

// WithMessageCode gives code to an answer with one of statuses whose message
// matches re, instead of the code the status alone would give. Some providers refuse
// for a full account or cluster with a 400 or a 403 (Daytona's "Total CPU limit
// exceeded", "No available runners"): read by status alone, the first failed the
// sandbox for good and the second marked the pool's credentials as rejected, where
// the contract wants insufficient_capacity, a requeue that leaves the pool healthy.
// Rules are tried in the order given, before the status mapping.
func WithMessageCode(code api.Code, re *regexp.Regexp, statuses ...int) Option {
	return func(c *Client) { c.rules = append(c.rules, messageRule{code: code, re: re, statuses: statuses}) }
}

// New builds a client for an API rooted at baseURL (http or https).
func New(provider, baseURL string, opts ...Option) (*Client, error) {
	u, err := url.Parse(strings.TrimRight(baseURL, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, adapters.InvalidRequest("%s: apiURL %q is not an http(s) URL", provider, safeurl.Describe(baseURL))
	}
	if u.User != nil {
		return nil, adapters.InvalidRequest("%s: apiURL must not hold credentials", provider)
	}
	c := &Client{Provider: provider, base: u, maxJSON: MaxJSONBody}
	for _, o := range opts {
		o(c)
	}
	if c.http == nil {
		c.http = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	return c, nil
}

// URL resolves a path (with an optional query) against the base URL. The path is
// in its wire form: callers escape each segment they take from elsewhere
// (url.PathEscape), and it is not escaped again. A path that is not a valid
// escaping (a bare %) gives a URL that NewRequest refuses.
func (c *Client) URL(path string, query url.Values) string {
	u := *c.base
	raw := c.base.EscapedPath() + path
	p, err := url.PathUnescape(raw)
	if err != nil {
		return u.Scheme + "://" + u.Host + raw
	}
	// Path and RawPath agree, so String writes RawPath as it is; setting Path
	// alone would have a segment's %20 sent as %2520.
	u.Path, u.RawPath = p, raw
	if len(query) > 0 {
		u.RawQuery = query.Encode()
	}
	return u.String()
}

// NewRequest builds a request for path with the client's credentials set.
func (c *Client) NewRequest(ctx context.Context, method, path string, query url.Values, body io.Reader) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.URL(path, query), body)
	if err != nil {
		return nil, adapters.InvalidRequest("%s: %v", c.Provider, c.Scrub(err.Error()))
	}
	if c.authorize != nil {
		c.authorize(req)
	}
	return req, nil
}

// Send performs req and returns the response when its status is 2xx; any other
// answer is read, closed and returned as the mapped error.
func (c *Client) Send(req *http.Request) (*http.Response, error) {
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, c.TransportError(err)
	}
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return resp, nil
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, MaxErrorBody))
	return nil, c.StatusError(resp.StatusCode, body)
}

// JSON sends in (when not nil) as a JSON body and decodes a 2xx answer into out (when
// not nil). An empty answer leaves out untouched.
func (c *Client) JSON(ctx context.Context, method, path string, query url.Values, in, out any) error {
	resp, err := c.sendJSON(ctx, method, path, query, in)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, c.maxJSON+1))
	if err != nil {
		return c.TransportError(err)
	}
	if int64(len(data)) > c.maxJSON {
		return adapters.Unavailable("%s: answer to %s %s is over %d MiB", c.Provider, method, path, c.maxJSON>>20)
	}
	if out == nil || len(bytes.TrimSpace(data)) == 0 {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return adapters.Unavailable("%s: malformed answer to %s %s: %s", c.Provider, method, path, c.Scrub(err.Error()))
	}
	return nil
}

// JSONObject is JSON for an answer that may be too large to hold, such as a
// command's output: the 2xx answer, at most limit bytes, must be one JSON object,
// which ReadObject hands to f as it is read. An error that a writer of f returns
// is returned as is when it is an *api.Error.
func (c *Client) JSONObject(ctx context.Context, method, path string, query url.Values, in any, limit int64, f Fields) error {
	resp, err := c.sendJSON(ctx, method, path, query, in)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	err = ReadObject(resp.Body, limit, f)
	var malformed *MalformedError
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrTooLarge):
		return adapters.Unavailable("%s: answer to %s %s is over %d MiB", c.Provider, method, path, limit>>20)
	case errors.As(err, &malformed):
		return adapters.Unavailable("%s: malformed answer to %s %s: %s", c.Provider, method, path, c.Scrub(err.Error()))
	case api.AsError(err) != nil:
		return err
	}
	return c.TransportError(err)
}

// sendJSON sends in (when not nil) as a JSON body and returns a 2xx response.
func (c *Client) sendJSON(ctx context.Context, method, path string, query url.Values, in any) (*http.Response, error) {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return nil, fmt.Errorf("%s: encode request: %w", c.Provider, err)
		}
		body = bytes.NewReader(b)
	}
	req, err := c.NewRequest(ctx, method, path, query, body)
	if err != nil {
		return nil, err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	return c.Send(req)
}

// StatusError maps a provider's non-2xx answer to the contract's error codes.
func (c *Client) StatusError(status int, body []byte) *api.Error {
	// Scrubbed before it is cut short, so that a credential straddling the cut
	// cannot survive as a fragment.
	msg := cut(c.Scrub(oneLine(c.Scrub(extract(body)))))
	if msg == "" {
		msg = http.StatusText(status)
	}
	for _, r := range c.rules {
		if slices.Contains(r.statuses, status) && r.re.MatchString(msg) {
			return api.Errorf(r.code, "%s: %s", c.Provider, msg).WithDetail("status", status)
		}
	}
	var e *api.Error
	switch {
	case status == http.StatusNotFound:
		e = api.Errorf(api.CodeNotFound, "%s: %s", c.Provider, msg)
	case status == http.StatusTooManyRequests:
		e = api.Errorf(api.CodeInsufficientCapacity, "%s: rate or capacity limit: %s", c.Provider, msg)
	case status == http.StatusConflict:
		e = api.Errorf(api.CodeInvalidState, "%s: %s", c.Provider, msg)
	case status == http.StatusBadRequest || status == http.StatusUnprocessableEntity:
		e = api.Errorf(api.CodeInvalidRequest, "%s: %s", c.Provider, msg)
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		// The provider's message may quote the credential; say only what happened.
		e = api.Errorf(api.CodeProviderUnavailable, "%s: credentials were rejected (HTTP %d)", c.Provider, status)
	default:
		e = api.Errorf(api.CodeProviderUnavailable, "%s: HTTP %d: %s", c.Provider, status, msg)
	}
	return e.WithDetail("status", status)
}

// TransportError maps a failed round trip (refused, reset, timed out, cancelled) to
// provider_unavailable, keeping the context's error reachable with errors.Is.
func (c *Client) TransportError(err error) error {
	msg := c.Scrub(err.Error())
	if errors.Is(err, context.DeadlineExceeded) {
		msg = "timed out: " + msg
	}
	return &wrapped{apiErr: adapters.Unavailable("%s: %s", c.Provider, msg), cause: err}
}

// wrapped is an *api.Error that also unwraps to its cause (context.Canceled, say).
type wrapped struct {
	apiErr *api.Error
	cause  error
}

func (w *wrapped) Error() string   { return w.apiErr.Error() }
func (w *wrapped) Unwrap() []error { return []error{w.apiErr, w.cause} }

// Scrub removes every secret the client holds from s, in the escaped forms a
// provider may echo it in as well.
func (c *Client) Scrub(s string) string { return c.redact.String(s) }

// ScrubError returns e without the client's secrets in its message or details.
func (c *Client) ScrubError(e *api.Error) *api.Error { return c.redact.Error(e) }

// Message extracts a human message from a provider's error body: the "message" (or
// "error", or "detail") field of a JSON object, else the text itself, on one line and
// cut short. It knows no secrets: a client's errors use Scrub before the cut.
func Message(body []byte) string {
	return cut(oneLine(extract(body)))
}

func extract(body []byte) string {
	var obj map[string]any
	if json.Unmarshal(body, &obj) == nil {
		for _, key := range []string{"message", "error", "detail"} {
			if s, ok := obj[key].(string); ok && s != "" {
				return s
			}
		}
	}
	return string(body)
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// cut shortens a message to 500 bytes, on a rune boundary.
func cut(s string) string {
	if len(s) <= maxMessage {
		return s
	}
	return textcut.Prefix(s, maxMessage) + "…"
}

// maxMessage bounds the provider text quoted in an error.
const maxMessage = 500

// Poll calls check every interval until it reports done or fails, bounded by ctx.
// Providers with asynchronous operations (pause, snapshots) settle this way.
func Poll(ctx context.Context, interval time.Duration, check func(context.Context) (bool, error)) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		done, err := check(ctx)
		if err != nil || done {
			return err
		}
		select {
		case <-ctx.Done():
			return adapters.Unavailable("gave up waiting: %v", ctx.Err())
		case <-t.C:
		}
	}
}

// WaitState polls like Poll for a sandbox on its way to a state, after the provider
// answered the request that set it on its way (a create, a start); what describes
// where it was, for the message ("daytona: sandbox X was still creating").
//
// When the caller's deadline ends the wait, during a pause or a read, the backend
// was up and this sandbox did not get there in the time it was given:
// sandbox_failed, which the scheduler retries without taking the pool for down, where
// provider_unavailable would have had one slow image pull mark the whole pool
// unhealthy. A read that fails before the deadline, and a wait cancelled (a
// shutdown), keep the error they had.
func WaitState(ctx context.Context, interval time.Duration, what func() string, check func(context.Context) (bool, error)) error {
	err := Poll(ctx, interval, check)
	if err != nil && api.CodeOf(err) == api.CodeProviderUnavailable && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return adapters.SandboxFailed("%s when the wait ended: %v", what(), ctx.Err())
	}
	return err
}

// ReadFileBody reads a file download of at most api.MaxFileBytes and closes the
// body. A larger file is payload_too_large, never a silent cut; name is the file's
// path for the message.
func (c *Client) ReadFileBody(resp *http.Response, name string) ([]byte, error) {
	defer resp.Body.Close()
	tooLarge := adapters.TooLarge("%s: %s is larger than %d MiB, the most a file read returns", c.Provider, name, api.MaxFileBytes>>20)
	if resp.ContentLength > api.MaxFileBytes {
		return nil, tooLarge
	}
	// One byte over the limit tells a file that is too large from one that fits.
	data, err := io.ReadAll(io.LimitReader(resp.Body, api.MaxFileBytes+1))
	if err != nil {
		return nil, c.TransportError(err)
	}
	if len(data) > api.MaxFileBytes {
		return nil, tooLarge
	}
	return data, nil
}
