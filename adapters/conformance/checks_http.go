package conformance

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/adapters/adapterhttp"
	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/internal/ids"
)

// RunHTTP checks what only raw requests see of a server of the adapter protocol:
// authentication on every route, the error envelope and the protocol header on
// refusals, and the status codes of the protocol where the client would hide them.
// endpoint is the base URL given to adapterhttp.NewClient and token the one the
// control plane would send; with no token the authentication checks are skipped, and
// say so. Run complements it with the contract every adapter follows.
func RunHTTP(ctx context.Context, endpoint, token string, opts Options) Report {
	h := newHTTPSuite(endpoint, token, opts)
	var report Report
	for _, c := range httpChecks() {
		report.Results = append(report.Results, h.runCheck(ctx, c))
	}
	return report
}

// TestHTTP runs RunHTTP's checks as subtests of t, one per check.
func TestHTTP(t *testing.T, endpoint, token string, opts Options) {
	t.Helper()
	h := newHTTPSuite(endpoint, token, opts)
	for _, c := range httpChecks() {
		t.Run(c.name, func(t *testing.T) { report(t, h.runCheck(t.Context(), c)) })
	}
}

type httpCheck struct {
	name string
	run  func(ctx context.Context, h *httpSuite) error
}

func httpChecks() []httpCheck {
	return []httpCheck{
		{"http/auth/no-token", func(ctx context.Context, h *httpSuite) error { return h.checkRefused(ctx, "") }},
		{"http/auth/wrong-token", func(ctx context.Context, h *httpSuite) error {
			return h.checkRefused(ctx, "wrong-"+ids.New("token"))
		}},
		{"http/unknown-path", checkUnknownPath},
		{"http/delete-missing", checkDeleteMissingHTTP},
	}
}

type httpSuite struct {
	base    string // endpoint + adapterhttp.BasePath
	token   string
	timeout time.Duration
	hc      *http.Client
}

func newHTTPSuite(endpoint, token string, opts Options) *httpSuite {
	if opts.CheckTimeout <= 0 {
		opts.CheckTimeout = 2 * time.Minute
	}
	return &httpSuite{
		base:    strings.TrimRight(endpoint, "/") + adapterhttp.BasePath,
		token:   token,
		timeout: opts.CheckTimeout,
		hc: &http.Client{
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
	}
}

func (h *httpSuite) runCheck(ctx context.Context, c httpCheck) Result {
	return runOne(ctx, h.timeout, c.name, func(ctx context.Context) error { return c.run(ctx, h) })
}

// route is one request of the protocol. The refs name nothing, so that a server that
// wrongly serves an unauthenticated request still changes nothing.
type route struct {
	method, path string
	body         string // JSON, or raw bytes for file content
}

func protocolRoutes() []route {
	ref := "conformance-missing-" + ids.New("ref")
	in := "/instances/" + ref
	return []route{
		{http.MethodGet, "/info", ""},
		{http.MethodGet, "/capacity", ""},
		{http.MethodGet, "/health", ""},
		{http.MethodPost, "/instances", "{}"},
		{http.MethodGet, "/instances?installation=" + ids.New("inst"), ""},
		{http.MethodGet, in, ""},
		{http.MethodDelete, in, ""},
		{http.MethodPost, in + "/exec", `{"command":"true"}`},
		{http.MethodPost, in + "/exec?stream=1", `{"command":"true"}`},
		{http.MethodGet, in + "/files?path=/", ""},
		{http.MethodGet, in + "/files/content?path=/conformance", ""},
		{http.MethodPut, in + "/files/content?path=/conformance", "x"},
		{http.MethodPost, in + "/stop", ""},
		{http.MethodPost, in + "/start", ""},
		{http.MethodPost, in + "/pause", ""},
		{http.MethodPost, in + "/resume", ""},
		{http.MethodPost, in + "/snapshots", `{"kind":"disk"}`},
		{http.MethodDelete, "/snapshots/" + ref, ""},
		{http.MethodPost, in + "/ports", `{"port":8080}`},
		{http.MethodPost, in + "/ttl", `{"ttlSeconds":60}`},
	}
}

// answer is what the checks look at in a response.
type answer struct {
	status   int
	protocol string
	envelope *api.Error // nil unless the body is the error envelope
	problem  string     // why the body is not the envelope
}

// do sends one request with bearer (no Authorization header when empty).
func (h *httpSuite) do(ctx context.Context, r route, bearer string) (answer, error) {
	var body io.Reader
	if r.body != "" {
		body = strings.NewReader(r.body)
	}
	req, err := http.NewRequestWithContext(ctx, r.method, h.base+r.path, body)
	if err != nil {
		return answer{}, err
	}
	if r.body != "" {
		ct := "application/json"
		if strings.HasSuffix(r.path, "/files/content?path=/conformance") {
			ct = "application/octet-stream"
		}
		req.Header.Set("Content-Type", ct)
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	resp, err := h.hc.Do(req)
	if err != nil {
		return answer{}, fmt.Errorf("%s %s: %w", r.method, r.path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return answer{}, fmt.Errorf("%s %s: reading the answer: %w", r.method, r.path, err)
	}
	a := answer{status: resp.StatusCode, protocol: resp.Header.Get(adapterhttp.ProtocolHeader)}
	a.envelope, a.problem = parseEnvelope(resp.Header.Get("Content-Type"), raw)
	return a, nil
}

func parseEnvelope(contentType string, raw []byte) (*api.Error, string) {
	if mt, _, _ := mime.ParseMediaType(contentType); mt != "application/json" {
		return nil, fmt.Sprintf("Content-Type %q, want application/json", contentType)
	}
	var env struct {
		Error *api.Error `json:"error"`
	}
	if err := json.Unmarshal(bytes.TrimSpace(raw), &env); err != nil {
		return nil, fmt.Sprintf("body is not JSON: %v", err)
	}
	if env.Error == nil || env.Error.Code == "" {
		return nil, `body has no {"error":{"code":...}}`
	}
	return env.Error, ""
}

// expect fails unless a is status with the protocol header and, when code is set,
// the error envelope carrying code.
func (a answer) expect(what string, status int, code api.Code) error {
	var errs []string
	if a.status != status {
		errs = append(errs, fmt.Sprintf("status %d, want %d", a.status, status))
	}
	if a.protocol != adapters.ProtocolVersion {
		errs = append(errs, fmt.Sprintf("%s header %q, want %q", adapterhttp.ProtocolHeader, a.protocol, adapters.ProtocolVersion))
	}
	if code != "" {
		switch {
		case a.envelope == nil:
			errs = append(errs, a.problem)
		case a.envelope.Code != code:
			errs = append(errs, fmt.Sprintf("error code %s, want %s", a.envelope.Code, code))
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("%s: %s", what, strings.Join(errs, "; "))
}

// checkRefused sends every route with bearer instead of the configured token: each
// must be 401 unauthenticated, /info and /health included.
func (h *httpSuite) checkRefused(ctx context.Context, bearer string) error {
	if h.token == "" {
		return skipf("no token given, so authentication is not checked: give the plugin's token to check that it refuses requests without it")
	}
	what := "without a token"
	if bearer != "" {
		what = "with a wrong token"
	}
	var errs []error
	for _, r := range protocolRoutes() {
		a, err := h.do(ctx, r, bearer)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		errs = append(errs, a.expect(fmt.Sprintf("%s %s %s", r.method, r.path, what), http.StatusUnauthorized, api.CodeUnauthenticated))
	}
	return errors.Join(errs...)
}

// checkUnknownPath: a path that is no route answers 404 not_found in the envelope,
// which is what tells a client that the endpoint, not an instance, is wrong.
func checkUnknownPath(ctx context.Context, h *httpSuite) error {
	r := route{method: http.MethodGet, path: "/conformance-no-such-route"}
	a, err := h.do(ctx, r, h.token)
	if err != nil {
		return err
	}
	return a.expect("GET "+r.path, http.StatusNotFound, api.CodeNotFound)
}

// checkDeleteMissingHTTP: deleting an instance that does not exist is 204, never 404.
func checkDeleteMissingHTTP(ctx context.Context, h *httpSuite) error {
	r := route{method: http.MethodDelete, path: "/instances/conformance-missing-" + ids.New("ref")}
	a, err := h.do(ctx, r, h.token)
	if err != nil {
		return err
	}
	if err := a.expect("DELETE of a missing instance", http.StatusNoContent, ""); err != nil {
		if a.envelope != nil {
			err = fmt.Errorf("%w (answered %s: %s)", err, a.envelope.Code, a.envelope.Message)
		}
		return err
	}
	return nil
}
