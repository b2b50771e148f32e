package client_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/different-ai/differently/client"
)

// sandboxServer answers the wait route for sbx_1 with the state states[n] on the
// n-th call (the last one repeating), and the given reason. Every request's query is
// passed to seen, if set.
func sandboxServer(t *testing.T, reason string, states ...string) *httptest.Server {
	return sandboxServerSeeing(t, nil, reason, states...)
}

func sandboxServerSeeing(t *testing.T, seen func(*http.Request), reason string, states ...string) *httptest.Server {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/sandboxes/sbx_1/wait" {
			http.Error(w, "unexpected path "+r.URL.Path, http.StatusNotFound)
			return
		}
		if seen != nil {
			seen(r)
		}
		n := min(int(calls.Add(1))-1, len(states)-1)
		body := strings.Replace(sandboxJSON, `"state":"running"`,
			fmt.Sprintf(`"state":%q,"reason":%q`, states[n], reason), 1)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// WaitForState asks the wait route again after each answer that is not the state
// it waits for, naming every state and a bounded timeout, and never sleeps: the
// daemon's route does the waiting.
func TestWaitForStateAsksTheWaitRoute(t *testing.T) {
	var mu sync.Mutex
	var queries []string
	srv := sandboxServerSeeing(t, func(r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		queries = append(queries, r.URL.RawQuery)
	}, "", "queued", "provisioning", "provisioning", "running")
	var w waits
	c := newTestClient(t, srv.URL, &w)
	sb, err := c.WaitForState(t.Context(), "sbx_1", client.Stopped, client.Running)
	if err != nil || sb.State != client.Running {
		t.Fatalf("wait: %+v, %v", sb, err)
	}
	if got := w.get(); len(got) != 0 {
		t.Fatalf("WaitForState slept %v; the wait route does the waiting", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(queries) != 4 {
		t.Fatalf("%d requests, want 4: %q", len(queries), queries)
	}
	for _, q := range queries {
		v, err := url.ParseQuery(q)
		if err != nil || !slices.Equal(v["state"], []string{"stopped", "running"}) || v.Get("timeoutSeconds") != "30" {
			t.Fatalf("query %q, want both states and timeoutSeconds=30", q)
		}
	}

	// A context ending sooner shortens the wait asked for.
	queries = nil
	mu.Unlock()
	ctx, cancel := context.WithTimeout(t.Context(), 5500*time.Millisecond)
	defer cancel()
	if _, err := c.WaitForState(ctx, "sbx_1", client.Running); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	if len(queries) != 1 || !strings.Contains(queries[0], "timeoutSeconds=5") {
		t.Fatalf("with 5.5 s left the client asked %q, want timeoutSeconds=5", queries)
	}
}

func TestWaitForStateTerminal(t *testing.T) {
	srv := sandboxServer(t, "image not found", "provisioning", "failed")
	var w waits
	c := newTestClient(t, srv.URL, &w)
	sb, err := c.WaitForState(t.Context(), "sbx_1", client.Running)
	if sb == nil || sb.State != client.Failed || !errors.Is(err, client.ErrTerminalState) ||
		!strings.Contains(err.Error(), "failed") || !strings.Contains(err.Error(), "image not found") {
		t.Fatalf("wait: %+v, %v", sb, err)
	}
	// Waiting for the terminal state itself is fine.
	if sb, err := c.WaitForState(t.Context(), "sbx_1", client.Failed); err != nil || sb.State != client.Failed {
		t.Fatalf("wait for failed: %+v, %v", sb, err)
	}
}

func TestWaitForStateBoundedByContext(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	var calls atomic.Int32
	// The daemon answers "queued" (its timeout passed); on the third answer the
	// caller gives up.
	srv := sandboxServerSeeing(t, func(*http.Request) {
		if calls.Add(1) == 3 {
			cancel()
		}
	}, "no capacity", "queued")
	c, err := client.New(srv.URL, "t")
	if err != nil {
		t.Fatal(err)
	}
	sb, err := c.WaitForState(ctx, "sbx_1", client.Running)
	if !errors.Is(err, context.Canceled) || sb == nil || sb.State != client.Queued || calls.Load() != 3 {
		t.Fatalf("wait: %+v, %v after %d requests", sb, err, calls.Load())
	}
	if _, err := c.WaitForState(t.Context(), "sbx_1"); err == nil {
		t.Fatal("waiting for no state at all was accepted")
	}
}

// A daemon out of reach for a while (a restart: connections dropped, or 503 while
// its database fails over) does not end the wait; it is asked again, with the
// client's backoff, and the wait ends when the sandbox gets there.
func TestWaitForStateOutlastsADaemonAway(t *testing.T) {
	for _, tc := range []struct {
		name string
		fail func(w http.ResponseWriter)
	}{
		{"connections dropped", func(w http.ResponseWriter) {
			conn, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				conn.Close()
			}
		}},
		{"503", func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprint(w, `{"error":{"code":"provider_unavailable","message":"the database is unavailable; try again"}}`)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var calls atomic.Int32
			const away = 9 // more than one request's retries
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if calls.Add(1) <= away {
					tc.fail(w)
					return
				}
				w.Header().Set("Content-Type", "application/json")
				fmt.Fprint(w, sandboxJSON)
			}))
			defer srv.Close()
			var w waits
			c := newTestClient(t, srv.URL, &w)
			sb, err := c.WaitForState(t.Context(), "sbx_1", client.Running)
			if err != nil || sb.State != client.Running {
				t.Fatalf("wait: %+v, %v after %d requests", sb, err, calls.Load())
			}
			if calls.Load() != away+1 || len(w.get()) != away {
				t.Errorf("%d requests and %d waits, want %d and %d", calls.Load(), len(w.get()), away+1, away)
			}
		})
	}
	// Other refusals still end the wait at once.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprint(w, `{"error":{"code":"not_found","message":"sandbox not found"}}`)
	}))
	defer srv.Close()
	var w waits
	if _, err := newTestClient(t, srv.URL, &w).WaitForState(t.Context(), "sbx_1", client.Running); err == nil || len(w.get()) != 0 {
		t.Fatalf("a 404 gave %v after %d waits", err, len(w.get()))
	}
}

// A wait pauses between asking a daemon that is away even when retries are turned
// off (a zero backoff), instead of asking in a tight loop.
func TestWaitForStatePausesWithoutRetries(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if calls.Add(1) <= 3 {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprint(w, `{"error":{"code":"provider_unavailable","message":"away"}}`)
			return
		}
		fmt.Fprint(w, sandboxJSON)
	}))
	defer srv.Close()
	var w waits
	c := newTestClient(t, srv.URL, &w, client.WithRetry(1, 0, 0))
	if _, err := c.WaitForState(t.Context(), "sbx_1", client.Running); err != nil {
		t.Fatal(err)
	}
	got := w.get()
	if len(got) != 3 {
		t.Fatalf("%d pauses, want 3: %v", len(got), got)
	}
	for _, d := range got {
		if d < 100*time.Millisecond {
			t.Errorf("paused %v between asks, want at least 100ms", d)
		}
	}
}

// A host name that does not resolve ends the wait: it is a wrong endpoint, not a
// daemon that is away.
func TestWaitForStateGivesUpOnAnUnknownHost(t *testing.T) {
	var w waits
	// The resolver's answer, without asking one: tests stay on loopback.
	noSuchHost := &http.Client{Transport: &http.Transport{DialContext: func(context.Context, string, string) (net.Conn, error) {
		// As net.Dialer reports it: the resolver's error inside a dial error.
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: &net.DNSError{Err: "no such host", Name: "daemon.example", IsNotFound: true}}
	}}}
	c := newTestClient(t, "http://daemon.example:8700", &w, client.WithHTTP(noSuchHost))
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if _, err := c.WaitForState(ctx, "sbx_1", client.Running); err == nil || ctx.Err() != nil {
		t.Fatalf("wait on an unknown host: %v (context %v)", err, ctx.Err())
	}
}

// DeleteSandboxAndWait takes a failed sandbox for gone: the daemon keeps a failed
// sandbox failed (a delete answers it as it is), so waiting for terminated would
// fail every delete of one.
func TestDeleteSandboxAndWaitAcceptsFailed(t *testing.T) {
	for _, tc := range []struct {
		name            string
		deleted, waited string // the delete's answer, and the wait route's
		want            client.SandboxState
	}{
		{"failed already", "failed", "failed", client.Failed},
		{"failed while terminating", "terminating", "failed", client.Failed},
		{"terminated", "terminating", "terminated", client.Terminated},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				state := tc.waited
				if r.Method == http.MethodDelete {
					state = tc.deleted
				}
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusAccepted)
				fmt.Fprint(w, strings.Replace(sandboxJSON, `"state":"running"`, fmt.Sprintf(`"state":%q`, state), 1))
			}))
			defer srv.Close()
			var w waits
			sb, err := newTestClient(t, srv.URL, &w).DeleteSandboxAndWait(t.Context(), "sbx_1")
			if err != nil || sb == nil || sb.State != tc.want {
				t.Fatalf("delete and wait: %+v, %v; want %s", sb, err, tc.want)
			}
		})
	}
}
