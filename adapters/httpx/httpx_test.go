package httpx_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/different-ai/differently/adapters/httpx"
	"github.com/different-ai/differently/api"
)

const secret = "sk-live-very-secret"

func TestStatusMapping(t *testing.T) {
	tests := []struct {
		status int
		body   string
		code   api.Code
		want   string
	}{
		{404, `{"message":"sandbox gone"}`, api.CodeNotFound, "sandbox gone"},
		{429, `{"error":"slow down"}`, api.CodeInsufficientCapacity, "slow down"},
		{409, `conflict`, api.CodeInvalidState, "conflict"},
		{400, `{"detail":"bad image"}`, api.CodeInvalidRequest, "bad image"},
		{422, `{"message":"nope"}`, api.CodeInvalidRequest, "nope"},
		{401, `{"message":"key ` + secret + ` is invalid"}`, api.CodeProviderUnavailable, "credentials were rejected"},
		{403, ``, api.CodeProviderUnavailable, "credentials were rejected"},
		{500, `{"message":"boom with ` + secret + `"}`, api.CodeProviderUnavailable, "HTTP 500: boom with [redacted]"},
		{502, ``, api.CodeProviderUnavailable, "Bad Gateway"},
	}
	for _, tt := range tests {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("X-Key") != secret {
				t.Errorf("credential header not sent")
			}
			w.WriteHeader(tt.status)
			w.Write([]byte(tt.body))
		}))
		c, err := httpx.New("prov", srv.URL, httpx.WithHeader("X-Key", secret))
		if err != nil {
			t.Fatal(err)
		}
		err = c.JSON(t.Context(), "GET", "/x", nil, nil, nil)
		srv.Close()
		if api.CodeOf(err) != tt.code || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("status %d: got %v, want %s containing %q", tt.status, err, tt.code, tt.want)
		}
		if strings.Contains(err.Error(), secret) {
			t.Errorf("status %d: error leaks the credential: %v", tt.status, err)
		}
	}
}

func TestJSONRoundTripAndTransportErrors(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/base/items" || r.URL.Query().Get("q") != "a b" || r.Header.Get("Authorization") != "Bearer tok" {
			t.Errorf("request %s %s %v", r.URL.Path, r.URL.RawQuery, r.Header)
		}
		w.Write([]byte(`{"n": 3}`))
	}))
	defer srv.Close()
	c, err := httpx.New("prov", srv.URL+"/base/", httpx.WithBearer("tok"))
	if err != nil {
		t.Fatal(err)
	}
	var out struct{ N int }
	if err := c.JSON(t.Context(), "POST", "/items", map[string][]string{"q": {"a b"}}, map[string]int{"x": 1}, &out); err != nil || out.N != 3 {
		t.Fatalf("%v %+v", err, out)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	err = c.JSON(ctx, "GET", "/items", nil, nil, nil)
	if api.CodeOf(err) != api.CodeProviderUnavailable || !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled call: %v", err)
	}
	dead, _ := httpx.New("prov", "http://127.0.0.1:1")
	if err := dead.JSON(t.Context(), "GET", "/", nil, nil, nil); api.CodeOf(err) != api.CodeProviderUnavailable {
		t.Errorf("refused connection: %v", err)
	}
}

func TestNewRejectsBadURLs(t *testing.T) {
	for _, u := range []string{"", "ftp://x", "http://", "http://user:pw@host"} {
		if _, err := httpx.New("prov", u); api.CodeOf(err) != api.CodeInvalidRequest {
			t.Errorf("%q: %v", u, err)
		}
	}
}

func TestPollStopsOnContext(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	calls := 0
	err := httpx.Poll(ctx, 1, func(context.Context) (bool, error) {
		calls++
		if calls == 3 {
			cancel()
		}
		return false, nil
	})
	if api.CodeOf(err) != api.CodeProviderUnavailable || calls < 3 {
		t.Errorf("poll: %v after %d calls", err, calls)
	}
}

// TestErrorsNeverQuoteTheCredential: a provider that echoes what it was sent, in any
// shape, never gets the credential into an error: not whole, not cut in two by the
// message's length limit, not JSON- or URL-escaped, not in a malformed answer.
func TestErrorsNeverQuoteTheCredential(t *testing.T) {
	const key = "k3y/with+odd<chars>&more=" + secret
	escaped := strings.Trim(string(must(json.Marshal(key))), `"`)
	for _, tc := range []struct {
		name   string
		status int
		body   func(r *http.Request) string
	}{
		{"json message", 500, func(r *http.Request) string {
			return string(must(json.Marshal(map[string]string{"message": "bad key " + r.Header.Get("X-Key")})))
		}},
		{"whole header dump as json", 502, func(r *http.Request) string { return string(must(json.Marshal(r.Header))) }},
		{"escaped slashes", 503, func(r *http.Request) string {
			return `{"headers":{"X-Key":"` + strings.ReplaceAll(escaped, "/", `\/`) + `"}}`
		}},
		{"url-encoded", 500, func(r *http.Request) string { return "GET /x?key=" + url.QueryEscape(r.Header.Get("X-Key")) }},
		{"path-encoded", 500, func(r *http.Request) string { return "GET /keys/" + url.PathEscape(r.Header.Get("X-Key")) }},
		// The key starts before the 500-byte cut of a message and ends after it.
		{"across the cut", 500, func(r *http.Request) string {
			return strings.Repeat("p", 480) + r.Header.Get("X-Key") + " trailing"
		}},
		{"across the cut in json", 404, func(r *http.Request) string {
			return string(must(json.Marshal(map[string]string{"message": strings.Repeat("p", 486) + r.Header.Get("X-Key")})))
		}},
		{"malformed answer", 200, func(r *http.Request) string { return `{"n": "` + r.Header.Get("X-Key") }},
		{"wrong type", 200, func(r *http.Request) string { return `{"n": "` + r.Header.Get("X-Key") + `"}` }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(tc.status)
				_, _ = io.WriteString(w, tc.body(r))
			}))
			defer srv.Close()
			c, err := httpx.New("prov", srv.URL, httpx.WithHeader("X-Key", key))
			if err != nil {
				t.Fatal(err)
			}
			var out struct{ N int }
			err = c.JSON(t.Context(), "GET", "/x", nil, nil, &out)
			if err == nil {
				t.Fatal("no error")
			}
			msg := err.Error()
			if e := api.AsError(err); e != nil {
				msg += fmt.Sprint(e.Details)
			}
			for _, form := range []string{key, secret, escaped, url.QueryEscape(key), url.PathEscape(key)} {
				if leaked := leakedPart(msg, form); leaked != "" {
					t.Fatalf("error quotes %q of the credential: %s", leaked, msg)
				}
			}
		})
	}
}

// leakedPart returns a 12-byte piece of secret found in s, or "".
func leakedPart(s, secret string) string {
	const n = 12
	for i := 0; i+n <= len(secret); i++ {
		if strings.Contains(s, secret[i:i+n]) {
			return secret[i : i+n]
		}
	}
	return ""
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestPathsAreEscapedOnce: callers escape the segments they take from elsewhere, and
// the client sends them as they are; an escape of its own would turn a ref's %20
// into %2520 and make the provider answer 404 for a sandbox that exists.
func TestPathsAreEscapedOnce(t *testing.T) {
	got := make(chan string, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.URL.EscapedPath()
	}))
	defer srv.Close()
	for _, tc := range []struct{ base, path, want string }{
		{srv.URL, "/x/" + url.PathEscape("a b"), "/x/a%20b"},
		{srv.URL + "/api/", "/snapshots/" + url.PathEscape("my snap:1"), "/api/snapshots/my%20snap:1"},
		{srv.URL, "/x/" + url.PathEscape("a/b?c#d%e"), "/x/a%2Fb%3Fc%23d%25e"},
		{srv.URL + "/with%20space", "/x", "/with%20space/x"},
	} {
		c, err := httpx.New("prov", tc.base)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.JSON(t.Context(), "GET", tc.path, url.Values{"q": {"1"}}, nil, nil); err != nil {
			t.Errorf("%s: %v", tc.path, err)
			continue
		}
		if p := <-got; p != tc.want {
			t.Errorf("%s on %s: the server saw %q, want %q", tc.path, tc.base, p, tc.want)
		}
	}
	c, _ := httpx.New("prov", srv.URL)
	if err := c.JSON(t.Context(), "GET", "/x/50%", nil, nil, nil); api.CodeOf(err) != api.CodeInvalidRequest {
		t.Errorf("a path that is no valid escaping: %v, want invalid_request", err)
	}
}

// TestCapacityMessages: a provider's refusal for want of room under a status other
// than 429 is insufficient_capacity when the adapter names its messages, and only
// then (a message of another rule gets that rule's code); the credential is still
// scrubbed from what is quoted.
func TestCapacityMessages(t *testing.T) {
	re := regexp.MustCompile(`(?i)limit exceeded|no available runners`)
	tests := []struct {
		status int
		body   string
		code   api.Code
		want   string
	}{
		{403, `{"statusCode":403,"message":"Total CPU limit exceeded. Maximum allowed: 10."}`, api.CodeInsufficientCapacity, "Total CPU limit exceeded"},
		{400, `{"message":"No available runners"}`, api.CodeInsufficientCapacity, "No available runners"},
		{403, `{"message":"Total memory limit exceeded for ` + secret + `"}`, api.CodeInsufficientCapacity, "[redacted]"},
		{403, `{"message":"CPU request 8 exceeds maximum allowed per sandbox (4)"}`, api.CodeInvalidRequest, "per sandbox"},
		{403, `{"message":"Forbidden"}`, api.CodeProviderUnavailable, "credentials were rejected"},
		{400, `{"message":"bad snapshot name"}`, api.CodeInvalidRequest, "bad snapshot name"},
		// Not one of the statuses named: the status decides.
		{500, `{"message":"Total CPU limit exceeded"}`, api.CodeProviderUnavailable, "HTTP 500"},
	}
	for _, tt := range tests {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(tt.status)
			w.Write([]byte(tt.body))
		}))
		c, err := httpx.New("prov", srv.URL, httpx.WithBearer(secret),
			httpx.WithMessageCode(api.CodeInvalidRequest, regexp.MustCompile(`per sandbox`), http.StatusForbidden),
			httpx.WithMessageCode(api.CodeInsufficientCapacity, re, http.StatusBadRequest, http.StatusForbidden))
		if err != nil {
			t.Fatal(err)
		}
		err = c.JSON(t.Context(), "POST", "/sandbox", nil, nil, nil)
		srv.Close()
		if api.CodeOf(err) != tt.code || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%d %s: got %v, want %s containing %q", tt.status, tt.body, err, tt.code, tt.want)
		}
		if strings.Contains(err.Error(), secret) {
			t.Errorf("error leaks the credential: %v", err)
		}
	}
}

// TestWaitState: a deadline that ends a wait after the provider answered is the
// sandbox's failure, whether it passes in a pause or during a read; a cancellation,
// or a read that fails before the deadline, is not.
func TestWaitState(t *testing.T) {
	still := func() string { return "prov: sandbox x was still pending" }
	expired := func() context.Context {
		ctx, cancel := context.WithDeadline(t.Context(), time.Now().Add(-time.Second))
		t.Cleanup(cancel)
		return ctx
	}
	cancelled := func() context.Context {
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		return ctx
	}
	down := api.Errorf(api.CodeProviderUnavailable, "down")
	for _, tc := range []struct {
		name  string
		ctx   context.Context
		reads error
		want  api.Code
		text  string
	}{
		{"deadline in a pause", expired(), nil, api.CodeSandboxFailed, "still pending when the wait ended"},
		{"deadline during a read", expired(), down, api.CodeSandboxFailed, "still pending when the wait ended"},
		{"cancelled", cancelled(), nil, api.CodeProviderUnavailable, "gave up waiting"},
		{"read fails in time", t.Context(), down, api.CodeProviderUnavailable, "down"},
		{"sandbox failed", expired(), api.Errorf(api.CodeSandboxFailed, "image pull"), api.CodeSandboxFailed, "image pull"},
	} {
		err := httpx.WaitState(tc.ctx, time.Millisecond, still, func(context.Context) (bool, error) {
			return false, tc.reads
		})
		if api.CodeOf(err) != tc.want || !strings.Contains(err.Error(), tc.text) {
			t.Errorf("%s: got %v, want %s containing %q", tc.name, err, tc.want, tc.text)
		}
	}
}
