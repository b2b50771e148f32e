package client

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/different-ai/differently/internal/safeurl"
)

// Client is the hand-written face of the API: typed wrappers that turn every non-2xx
// answer into an *APIError, waiting for sandbox states, streamed exec, and retries of
// idempotent calls. Anything not wrapped is reachable through API, which shares the
// same authentication, user agent and retries.
type Client struct {
	// API is the generated client, for operations this layer does not wrap.
	API *ClientWithResponses

	endpoint string
	opts     options
}

// Option configures New.
type Option func(*options)

type options struct {
	httpClient  *http.Client
	userAgent   string
	maxAttempts int
	baseDelay   time.Duration
	maxDelay    time.Duration

	// Seams for tests: waiting, reading the clock and jitter. Production uses a timer,
	// time.Now and math/rand.
	sleep  func(ctx context.Context, d time.Duration) error
	now    func() time.Time
	jitter func() float64
}

// DefaultUserAgent is sent unless WithUserAgent says otherwise.
const DefaultUserAgent = "differently-go-client"

// WithHTTP sends requests through hc (its Transport, Timeout, Jar and redirect
// policy). hc itself is not modified: New wraps a copy's transport with the retry
// layer.
func WithHTTP(hc *http.Client) Option {
	return func(o *options) { o.httpClient = hc }
}

// WithRetry sets how idempotent calls are retried on 429, 503 and connection errors:
// at most maxAttempts sends in all (1 disables retries), waiting a jittered
// baseDelay·2ⁿ capped at maxDelay between them, or the answer's Retry-After when that
// is longer (the server knows best; the caller's context bounds it). A Retry-After
// over a minute (or over maxDelay, when that is longer) is not waited out: that
// answer is returned at once, its APIError's RetryAfter saying how long it asked
// for. The default is 4 attempts, 200ms, 5s.
func WithRetry(maxAttempts int, baseDelay, maxDelay time.Duration) Option {
	return func(o *options) {
		o.maxAttempts = max(maxAttempts, 1)
		o.baseDelay = max(baseDelay, 0)
		o.maxDelay = max(maxDelay, o.baseDelay)
	}
}

// WithUserAgent sets the User-Agent header, so the daemon's logs can tell callers
// apart (the Terraform provider sends its own).
func WithUserAgent(ua string) Option {
	return func(o *options) { o.userAgent = ua }
}

// New returns a client for the daemon at endpoint (an http or https URL, optionally
// with a path prefix) that authenticates every request with token as a bearer token.
// An empty token sends no Authorization header, which only the health endpoints accept.
// Whitespace around the token, such as a token file's trailing newline, is dropped.
// The token is kept only inside the request editor: it is never part of the
// client's printed form or of any error.
func New(endpoint, token string, opts ...Option) (*Client, error) {
	u, err := url.Parse(endpoint)
	if err != nil {
		return nil, fmt.Errorf("differently: endpoint %q is not a URL: %w", safeurl.Describe(endpoint), safeurl.Reason(err))
	}
	// The endpoint is quoted only through safeurl, which leaves out user information.
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("differently: endpoint %q must be an http or https URL", safeurl.Describe(endpoint))
	}
	if u.Host == "" {
		return nil, fmt.Errorf("differently: endpoint %q has no host", safeurl.Describe(endpoint))
	}
	if u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return nil, errors.New("differently: endpoint must not carry user info, a query or a fragment")
	}
	// A token file ends in a newline (echo and most editors write one), so the
	// whitespace around the token is not part of it; a line break inside still is,
	// and would split the Authorization header.
	token = strings.TrimSpace(token)
	if strings.ContainsAny(token, "\r\n") {
		return nil, errors.New("differently: token must be a single line")
	}

	o := options{
		userAgent:   DefaultUserAgent,
		maxAttempts: 4,
		baseDelay:   200 * time.Millisecond,
		maxDelay:    5 * time.Second,
		sleep:       sleepCtx,
		now:         time.Now,
		jitter:      rand.Float64,
	}
	for _, opt := range opts {
		opt(&o)
	}

	var hc http.Client
	if o.httpClient != nil {
		hc = *o.httpClient
	}
	hc.Transport = &retryTransport{base: hc.Transport, opts: &o}

	editor := func(_ context.Context, req *http.Request) error {
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		if o.userAgent != "" {
			req.Header.Set("User-Agent", o.userAgent)
		}
		return nil
	}
	gen, err := NewClientWithResponses(u.String(), WithHTTPClient(&hc), WithRequestEditorFn(editor))
	if err != nil {
		return nil, fmt.Errorf("differently: %w", err)
	}
	return &Client{API: gen, endpoint: u.String(), opts: o}, nil
}

// Endpoint is the daemon's URL as given to New.
func (c *Client) Endpoint() string { return c.endpoint }

// String shows the endpoint only, so printing a client never prints its token.
func (c *Client) String() string { return "differently.Client(" + c.endpoint + ")" }

// GoString keeps %#v from printing the fields either.
func (c *Client) GoString() string { return c.String() }

// sleepCtx waits for d or until ctx is done, whichever comes first.
func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
