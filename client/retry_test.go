package client_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/client"
)

// waits records the client's waits instead of sleeping.
type waits struct {
	mu sync.Mutex
	d  []time.Duration
}

func (w *waits) sleep(ctx context.Context, d time.Duration) error {
	w.mu.Lock()
	w.d = append(w.d, d)
	w.mu.Unlock()
	return ctx.Err()
}

func (w *waits) get() []time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]time.Duration(nil), w.d...)
}

// flaky is an httptest server whose first `fail` answers are 503 (or status, when
// set) with retryAfter (when set), then 200 with body; it records every request.
type flaky struct {
	srv      *httptest.Server
	status   int
	attempts atomic.Int32
	mu       sync.Mutex
	bodies   []string
	auth     []string
}

func newFlaky(t *testing.T, fail int, retryAfter, body string) *flaky {
	f := &flaky{status: http.StatusServiceUnavailable}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := f.attempts.Add(1)
		b, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		f.bodies = append(f.bodies, string(b))
		f.auth = append(f.auth, r.Header.Get("Authorization")+"|"+r.Header.Get("User-Agent"))
		f.mu.Unlock()
		if int(n) <= fail {
			if retryAfter != "" {
				w.Header().Set("Retry-After", retryAfter)
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(f.status)
			io.WriteString(w, `{"error":{"code":"provider_unavailable","message":"busy","details":{"pool":"p"}}}`)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, body)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func newTestClient(t *testing.T, url string, w *waits, opts ...client.Option) *client.Client {
	t.Helper()
	c, err := client.New(url, "s3cret", append([]client.Option{
		client.WithSleep(w.sleep), client.WithJitter(func() float64 { return 1 }),
	}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

const sandboxJSON = `{"id":"sbx_1","state":"running","attempts":1,"capabilities":[],"labels":{},"org":"o","project":"p","resources":{},"createdAt":"2025-01-01T00:00:00Z","updatedAt":"2025-01-01T00:00:00Z"}`

func TestRetryHonoursRetryAfterSeconds(t *testing.T) {
	for _, status := range []int{http.StatusTooManyRequests, http.StatusServiceUnavailable} {
		t.Run(http.StatusText(status), func(t *testing.T) { testRetryAfterSeconds(t, status) })
	}
}

func testRetryAfterSeconds(t *testing.T, status int) {
	f := newFlaky(t, 2, "3", sandboxJSON)
	f.status = status
	var w waits
	c := newTestClient(t, f.srv.URL, &w, client.WithUserAgent("tests/1"))
	sb, err := c.GetSandbox(t.Context(), "sbx_1")
	if err != nil || sb.Id != "sbx_1" {
		t.Fatalf("get: %+v, %v", sb, err)
	}
	// Retry-After (3 s) is above the backoff (200 ms, 400 ms) and above maxDelay: the
	// server's floor wins.
	if got := w.get(); len(got) != 2 || got[0] != 3*time.Second || got[1] != 3*time.Second {
		t.Fatalf("waits %v, want [3s 3s]", got)
	}
	if n := f.attempts.Load(); n != 3 {
		t.Fatalf("%d attempts, want 3", n)
	}
	for _, a := range f.auth {
		if a != "Bearer s3cret|tests/1" {
			t.Fatalf("attempt sent %q", a)
		}
	}
}

func TestRetryHonoursRetryAfterDate(t *testing.T) {
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	f := newFlaky(t, 1, now.Add(4*time.Second).Format(http.TimeFormat), sandboxJSON)
	var w waits
	c := newTestClient(t, f.srv.URL, &w, client.WithClock(func() time.Time { return now }))
	if _, err := c.GetSandbox(t.Context(), "sbx_1"); err != nil {
		t.Fatal(err)
	}
	if got := w.get(); len(got) != 1 || got[0] != 4*time.Second {
		t.Fatalf("waits %v, want [4s]", got)
	}
}

func TestRetryBackoffGivesUpAfterMaxAttempts(t *testing.T) {
	f := newFlaky(t, 100, "", sandboxJSON)
	var w waits
	c := newTestClient(t, f.srv.URL, &w, client.WithRetry(5, time.Second, 3*time.Second))
	_, err := c.GetSandbox(t.Context(), "sbx_1")
	var apiErr *client.APIError
	if !errors.As(err, &apiErr) || apiErr.Status != 503 || apiErr.Code != api.CodeProviderUnavailable ||
		apiErr.Details["pool"] != "p" {
		t.Fatalf("after the last attempt: %v", err)
	}
	want := []time.Duration{time.Second, 2 * time.Second, 3 * time.Second, 3 * time.Second}
	if got := w.get(); !slices.Equal(got, want) {
		t.Fatalf("waits %v, want %v", got, want)
	}
	if n := f.attempts.Load(); n != 5 {
		t.Fatalf("%d attempts, want 5", n)
	}

	// Jitter only ever shortens a wait, to no less than half.
	var w2 waits
	c2 := newTestClient(t, f.srv.URL, &w2, client.WithRetry(2, time.Second, time.Second), client.WithJitter(func() float64 { return 0 }))
	c2.GetSandbox(t.Context(), "sbx_1")
	if got := w2.get(); !slices.Equal(got, []time.Duration{500 * time.Millisecond}) {
		t.Fatalf("zero-jitter waits %v", got)
	}
}

func TestRetryOnlyIdempotentCalls(t *testing.T) {
	var w waits
	// ExecSandbox is a POST without an idempotency key: one attempt, the 503 comes back.
	f := newFlaky(t, 1, "1", `{"exitCode":0,"stdout":"","stderr":"","durationMs":1,"truncated":false}`)
	c := newTestClient(t, f.srv.URL, &w)
	if _, err := c.ExecSandbox(t.Context(), "sbx_1", api.ExecRequest{Command: "true"}); !isStatus(err, 503) {
		t.Fatalf("exec: %v", err)
	}
	if n := f.attempts.Load(); n != 1 || len(w.get()) != 0 {
		t.Fatalf("exec was retried: %d attempts, waits %v", n, w.get())
	}

	// A lifecycle POST is not retried either.
	f = newFlaky(t, 1, "1", sandboxJSON)
	c = newTestClient(t, f.srv.URL, &w)
	if _, err := c.StopSandbox(t.Context(), "sbx_1"); !isStatus(err, 503) || f.attempts.Load() != 1 {
		t.Fatalf("stop: %v after %d attempts", err, f.attempts.Load())
	}

	// Create without a key: not retried. With one: retried, re-sending the same body.
	f = newFlaky(t, 1, "1", sandboxJSON)
	c = newTestClient(t, f.srv.URL, &w)
	if _, err := c.CreateSandbox(t.Context(), client.SandboxCreate{Template: ptr("base")}, ""); !isStatus(err, 503) {
		t.Fatalf("create without a key: %v", err)
	}
	f = newFlaky(t, 1, "1", sandboxJSON)
	c = newTestClient(t, f.srv.URL, &w)
	if _, err := c.CreateSandbox(t.Context(), client.SandboxCreate{Template: ptr("base")}, "key-1"); err != nil {
		t.Fatalf("create with a key: %v", err)
	}
	if len(f.bodies) != 2 || f.bodies[0] != f.bodies[1] || !strings.Contains(f.bodies[1], `"base"`) {
		t.Fatalf("bodies sent: %q", f.bodies)
	}

	// PUT of file bytes is idempotent and its body is re-sent too.
	f = newFlaky(t, 2, "", "")
	c = newTestClient(t, f.srv.URL, &w)
	if err := c.WriteSandboxFile(t.Context(), "sbx_1", "a.txt", []byte("payload")); err != nil {
		t.Fatal(err)
	}
	if len(f.bodies) != 3 || f.bodies[2] != "payload" {
		t.Fatalf("bodies sent: %q", f.bodies)
	}
}

func TestRetryStopsWithTheContext(t *testing.T) {
	f := newFlaky(t, 100, "1", sandboxJSON)
	ctx, cancel := context.WithCancel(t.Context())
	sleeps := 0
	c, err := client.New(f.srv.URL, "s3cret", client.WithSleep(func(ctx context.Context, d time.Duration) error {
		sleeps++
		cancel() // the caller gives up while the client waits
		return ctx.Err()
	}))
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.GetSandbox(ctx, "sbx_1")
	if !errors.Is(err, context.Canceled) || sleeps != 1 || f.attempts.Load() != 1 {
		t.Fatalf("cancelled: %v after %d sleeps and %d attempts", err, sleeps, f.attempts.Load())
	}
	var apiErr *client.APIError
	if errors.As(err, &apiErr) {
		t.Fatal("a cancellation must not look like an API answer")
	}

	// A Retry-After beyond the deadline is not waited out: the last answer comes back.
	f = newFlaky(t, 100, "3600", sandboxJSON)
	var w waits
	c = newTestClient(t, f.srv.URL, &w)
	dctx, dcancel := context.WithTimeout(t.Context(), time.Minute)
	defer dcancel()
	if _, err := c.GetSandbox(dctx, "sbx_1"); !isStatus(err, 503) || len(w.get()) != 0 || f.attempts.Load() != 1 {
		t.Fatalf("retry-after past the deadline: %v, waits %v, %d attempts", err, w.get(), f.attempts.Load())
	}
}

func TestRetryConnectionErrors(t *testing.T) {
	// A port nobody listens on: every dial is refused.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	var w waits
	c := newTestClient(t, "http://"+addr, &w, client.WithRetry(3, 100*time.Millisecond, time.Second))
	_, err = c.GetSandbox(t.Context(), "sbx_1")
	var apiErr *client.APIError
	if err == nil || errors.As(err, &apiErr) || !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("refused: %v", err)
	}
	if got := w.get(); !slices.Equal(got, []time.Duration{100 * time.Millisecond, 200 * time.Millisecond}) {
		t.Fatalf("waits %v", got)
	}

	// A server that drops the first connection mid-request, then answers.
	var attempts atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if attempts.Add(1) == 1 {
			conn, _, _ := rw.(http.Hijacker).Hijack()
			conn.Close()
			return
		}
		io.WriteString(rw, sandboxJSON)
	}))
	defer srv.Close()
	var w2 waits
	c = newTestClient(t, srv.URL, &w2)
	if _, err := c.GetSandbox(t.Context(), "sbx_1"); err != nil || attempts.Load() != 2 || len(w2.get()) != 1 {
		t.Fatalf("dropped connection: %v after %d attempts, waits %v", err, attempts.Load(), w2.get())
	}
}

func TestNew(t *testing.T) {
	for _, bad := range []string{"", "localhost:7070", "ftp://host", "http://", "http://u:p@host", "http://host/?q=1"} {
		if _, err := client.New(bad, "t"); err == nil {
			t.Errorf("New(%q) accepted", bad)
		}
	}
	c, err := client.New("https://daemon.example/prefix", "s3cret")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{c.String(), fmtAll(c)} {
		if strings.Contains(s, "s3cret") || !strings.Contains(s, "daemon.example") {
			t.Fatalf("printed client %q", s)
		}
	}
}

func isStatus(err error, status int) bool {
	var apiErr *client.APIError
	return errors.As(err, &apiErr) && apiErr.Status == status
}

func fmtAll(c *client.Client) string { return fmt.Sprintf("%v %+v %#v %s", c, c, c, c) }

// TestQuotaExceededIsNotRetried: a 429 that says quota_exceeded is final, and the
// caller still gets its full error.
func TestQuotaExceededIsNotRetried(t *testing.T) {
	var attempts atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		attempts.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusTooManyRequests)
		io.WriteString(w, `{"error":{"code":"quota_exceeded","message":"project acme/ci would use 3 of 2 sandboxes","details":{"quota":"sandboxes"}}}`)
	}))
	t.Cleanup(srv.Close)
	var w waits
	c := newTestClient(t, srv.URL, &w)
	_, err := c.CreateSandbox(t.Context(), client.SandboxCreate{}, "key-1")
	var apiErr *client.APIError
	if !errors.As(err, &apiErr) || apiErr.Status != http.StatusTooManyRequests || apiErr.Code != api.CodeQuotaExceeded ||
		!strings.Contains(apiErr.Message, "3 of 2") {
		t.Fatalf("error %v", err)
	}
	if n := attempts.Load(); n != 1 || len(w.get()) != 0 {
		t.Fatalf("%d attempts and waits %v, want one attempt and no wait", n, w.get())
	}
}

// TestRetryAfterIsCapped: a Retry-After up to a minute (or the backoff's maximum
// delay, when longer) is waited out; one asking for more (a proxy's day, say) is not
// waited for at all: the answer comes back at once, saying how long in RetryAfter.
func TestRetryAfterIsCapped(t *testing.T) {
	for _, tc := range []struct {
		name       string
		retryAfter int // seconds
		opts       []client.Option
		waits      []time.Duration
		attempts   int32
	}{
		{"a minute is waited", 60, nil, []time.Duration{time.Minute, time.Minute, time.Minute}, 4},
		{"a day is not", 86400, nil, nil, 1},
		{"over a minute is not", 61, nil, nil, 1},
		{"the maximum delay when longer", 90, []client.Option{client.WithRetry(2, time.Second, 2*time.Minute)}, []time.Duration{90 * time.Second}, 2},
		{"over the maximum delay", 121, []client.Option{client.WithRetry(2, time.Second, 2*time.Minute)}, nil, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFlaky(t, 100, strconv.Itoa(tc.retryAfter), sandboxJSON)
			var w waits
			c := newTestClient(t, f.srv.URL, &w, tc.opts...)
			_, err := c.GetSandbox(t.Context(), "sbx_1")
			var ae *client.APIError
			if !errors.As(err, &ae) || ae.Status != http.StatusServiceUnavailable || ae.RetryAfter != time.Duration(tc.retryAfter)*time.Second {
				t.Fatalf("error %#v, want a 503 asking for %d s", err, tc.retryAfter)
			}
			if got := w.get(); !slices.Equal(got, tc.waits) || f.attempts.Load() != tc.attempts {
				t.Fatalf("waits %v after %d attempts, want %v after %d", got, f.attempts.Load(), tc.waits, tc.attempts)
			}
		})
	}
}
