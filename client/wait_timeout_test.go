package client_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/different-ai/differently/client"
)

// headerTimeout is a transport that gives up on an answer's headers after d.
func headerTimeout(d time.Duration) *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.ResponseHeaderTimeout = d
	return &http.Client{Transport: tr}
}

// sandboxAnswer writes sandboxJSON in the given state.
func sandboxAnswer(w http.ResponseWriter, status int, state string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	io.WriteString(w, strings.Replace(sandboxJSON, `"state":"running"`, fmt.Sprintf(`"state":%q`, state), 1))
}

// hang holds a request until the client gives up on it. The body is read first: the
// server notices a closed connection only once it has.
func hang(r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	<-r.Context().Done()
}

// The daemon holds a waiting answer's headers for the whole wait, so the waits asked
// for stay below the transport's ResponseHeaderTimeout: on the wait route and in the
// Prefer header of CreateSandboxAndWait and DeleteSandboxAndWait.
func TestWaitsStayBelowTheResponseHeaderTimeout(t *testing.T) {
	var mu sync.Mutex
	var asked []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		if r.URL.Path == "/v1/sandboxes/sbx_1/wait" {
			asked = append(asked, r.Method+" wait "+r.URL.Query().Get("timeoutSeconds"))
		} else {
			asked = append(asked, r.Method+" "+r.Header.Get("Prefer"))
		}
		mu.Unlock()
		switch r.Method {
		case http.MethodPost:
			sandboxAnswer(w, http.StatusCreated, "provisioning")
		case http.MethodDelete:
			sandboxAnswer(w, http.StatusAccepted, "terminating")
		default:
			if r.URL.Query()["state"][0] == "terminated" {
				sandboxAnswer(w, http.StatusOK, "terminated")
			} else {
				sandboxAnswer(w, http.StatusOK, "running")
			}
		}
	}))
	defer srv.Close()
	var w waits
	c := newTestClient(t, srv.URL, &w, client.WithHTTP(headerTimeout(10*time.Second)))
	if _, err := c.CreateSandboxAndWait(t.Context(), client.SandboxCreate{}, "k"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.DeleteSandboxAndWait(t.Context(), "sbx_1"); err != nil {
		t.Fatal(err)
	}
	want := []string{"POST wait=9", "GET wait 9", "DELETE wait=9", "GET wait 9"}
	mu.Lock()
	defer mu.Unlock()
	if fmt.Sprint(asked) != fmt.Sprint(want) {
		t.Fatalf("asked %q, want %q", asked, want)
	}
}

// A wait whose headers do not come before the transport's ResponseHeaderTimeout (one
// shorter than the shortest wait, or a slow daemon) is asked again, like a daemon
// away, until the sandbox gets there or the context ends; the context's end then
// comes with the last sandbox seen, if any.
func TestWaitForStateAsksAgainAfterAHeaderTimeout(t *testing.T) {
	for _, tc := range []struct {
		name string
		// answer serves the n-th wait request (from 1); it may cancel the caller.
		answer    func(n int32, cancel context.CancelFunc, w http.ResponseWriter, r *http.Request)
		wantState client.SandboxState // "" for no sandbox
		wantErr   error
	}{
		{"the sandbox gets there", func(n int32, _ context.CancelFunc, w http.ResponseWriter, r *http.Request) {
			switch {
			case n == 1:
				sandboxAnswer(w, http.StatusOK, "queued")
			case n < 4:
				hang(r)
			default:
				sandboxAnswer(w, http.StatusOK, "running")
			}
		}, client.Running, nil},
		{"the context ends after an answer", func(n int32, cancel context.CancelFunc, w http.ResponseWriter, r *http.Request) {
			switch n {
			case 1:
				sandboxAnswer(w, http.StatusOK, "queued")
			case 3:
				cancel()
				fallthrough
			default:
				hang(r)
			}
		}, client.Queued, context.Canceled},
		{"the context ends before any answer", func(n int32, cancel context.CancelFunc, w http.ResponseWriter, r *http.Request) {
			if n == 3 {
				cancel()
			}
			hang(r)
		}, "", context.Canceled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			var calls atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				tc.answer(calls.Add(1), cancel, w, r)
			}))
			defer srv.Close()
			var w waits
			c := newTestClient(t, srv.URL, &w, client.WithHTTP(headerTimeout(250*time.Millisecond)))
			sb, err := c.WaitForState(ctx, "sbx_1", client.Running)
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil) != (err == nil) {
				t.Fatalf("wait: %v, want %v", err, tc.wantErr)
			}
			switch {
			case tc.wantState == "" && sb != nil:
				t.Fatalf("got sandbox %+v, want none", sb)
			case tc.wantState != "" && (sb == nil || sb.State != tc.wantState):
				t.Fatalf("got sandbox %+v, want one %s", sb, tc.wantState)
			}
		})
	}
}

// CreateSandboxAndWait (with an idempotency key, which makes asking again safe) and
// DeleteSandboxAndWait outlast a Prefer: wait whose answer does not come before the
// transport's ResponseHeaderTimeout: they ask again without Prefer and wait on. A
// create without a key cannot be asked again, and says why it failed.
func TestAndWaitOutlastAHeaderTimeout(t *testing.T) {
	var posts atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Prefer") != "" {
			if r.Method == http.MethodPost {
				posts.Add(1)
			}
			hang(r)
			return
		}
		switch r.Method {
		case http.MethodPost:
			posts.Add(1)
			sandboxAnswer(w, http.StatusCreated, "provisioning")
		case http.MethodDelete:
			sandboxAnswer(w, http.StatusAccepted, "terminating")
		default:
			sandboxAnswer(w, http.StatusOK, r.URL.Query()["state"][0])
		}
	}))
	defer srv.Close()
	var w waits
	c := newTestClient(t, srv.URL, &w, client.WithHTTP(headerTimeout(250*time.Millisecond)))
	sb, err := c.CreateSandboxAndWait(t.Context(), client.SandboxCreate{}, "key-1")
	if err != nil || sb.State != client.Running || posts.Load() != 2 {
		t.Fatalf("create and wait: %+v, %v after %d POSTs", sb, err, posts.Load())
	}
	if sb, err = c.DeleteSandboxAndWait(t.Context(), "sbx_1"); err != nil || sb.State != client.Terminated {
		t.Fatalf("delete and wait: %+v, %v", sb, err)
	}
	posts.Store(0)
	if sb, err = c.CreateSandboxAndWait(t.Context(), client.SandboxCreate{}, ""); err == nil || posts.Load() != 1 {
		t.Fatalf("create and wait without a key: %+v, %v after %d POSTs", sb, err, posts.Load())
	}
}
