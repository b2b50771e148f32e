package client_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/different-ai/differently/client"
)

// sandboxServer answers GET /v1/sandboxes/sbx_1 with the state states[n] on the n-th
// call (the last one repeating), and the given reason.
func sandboxServer(t *testing.T, reason string, states ...string) *httptest.Server {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := min(int(calls.Add(1))-1, len(states)-1)
		body := strings.Replace(sandboxJSON, `"state":"running"`,
			fmt.Sprintf(`"state":%q,"reason":%q`, states[n], reason), 1)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestWaitForStateBacksOff(t *testing.T) {
	srv := sandboxServer(t, "", "queued", "provisioning", "provisioning", "provisioning", "provisioning",
		"provisioning", "provisioning", "provisioning", "provisioning", "running")
	var w waits
	c := newTestClient(t, srv.URL, &w)
	sb, err := c.WaitForState(t.Context(), "sbx_1", client.Stopped, client.Running)
	if err != nil || sb.State != client.Running {
		t.Fatalf("wait: %+v, %v", sb, err)
	}
	// 100 ms, then ×1.5 each poll, capped at 2 s.
	us := time.Microsecond
	want := []time.Duration{100000 * us, 150000 * us, 225000 * us, 337500 * us, 506250 * us,
		759375 * us, 1139062500 * time.Nanosecond, 1708593750 * time.Nanosecond, 2 * time.Second}
	if got := w.get(); !slices.Equal(got, want) {
		t.Fatalf("waits %v, want %v", got, want)
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
	srv := sandboxServer(t, "no capacity", "queued")
	ctx, cancel := context.WithCancel(t.Context())
	polls := 0
	c, err := client.New(srv.URL, "t", client.WithSleep(func(ctx context.Context, d time.Duration) error {
		if polls++; polls == 3 {
			cancel()
		}
		return ctx.Err()
	}))
	if err != nil {
		t.Fatal(err)
	}
	sb, err := c.WaitForState(ctx, "sbx_1", client.Running)
	if !errors.Is(err, context.Canceled) || sb == nil || sb.State != client.Queued || polls != 3 {
		t.Fatalf("wait: %+v, %v after %d polls", sb, err, polls)
	}
	if _, err := c.WaitForState(t.Context(), "sbx_1"); err == nil {
		t.Fatal("waiting for no state at all was accepted")
	}
}
