package client_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/different-ai/differently/client"
)

// TestDeleteReplayedAfterALostAnswer: a DELETE the daemon carried out but whose
// answer was lost with the connection is sent again, and the 404 that answers the
// replay is the first attempt's success. A 404 to a first attempt, or to a retry after
// a refusal (which deleted nothing), is still a 404.
func TestDeleteReplayedAfterALostAnswer(t *testing.T) {
	deletes := map[string]func(context.Context, *client.Client) error{
		"snapshot": func(ctx context.Context, c *client.Client) error { return c.DeleteSnapshot(ctx, "snp_1") },
		"token":    func(ctx context.Context, c *client.Client) error { return c.DeleteToken(ctx, "tok_1") },
		"profile":  func(ctx context.Context, c *client.Client) error { return c.DeleteProfile(ctx, "small") },
		"project":  func(ctx context.Context, c *client.Client) error { return c.DeleteProject(ctx, "acme", "ci") },
		"pool":     func(ctx context.Context, c *client.Client) error { return c.DeletePool(ctx, "p", true) },
	}
	notFound := func(w http.ResponseWriter) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		io.WriteString(w, `{"error":{"code":"not_found","message":"not found"}}`)
	}
	for _, tc := range []struct {
		name string
		// first answers the first attempt; every later one is a 404.
		first        func(w http.ResponseWriter)
		attempts     int32
		wantNotFound bool
	}{
		{"answer lost", func(w http.ResponseWriter) {
			// Deleted; then the connection drops before the answer.
			conn, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				conn.Close()
			}
		}, 2, false},
		{"not found", notFound, 1, true},
		{"refused, then not found", func(w http.ResponseWriter) {
			w.WriteHeader(http.StatusServiceUnavailable)
		}, 2, true},
	} {
		for what, del := range deletes {
			t.Run(tc.name+"/"+what, func(t *testing.T) {
				var attempts atomic.Int32
				srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if r.Method != http.MethodDelete {
						t.Errorf("%s %s", r.Method, r.URL)
					}
					if attempts.Add(1) == 1 {
						tc.first(w)
						return
					}
					notFound(w)
				}))
				defer srv.Close()
				var w waits
				err := del(t.Context(), newTestClient(t, srv.URL, &w))
				if client.IsNotFound(err) != tc.wantNotFound || !tc.wantNotFound && err != nil || attempts.Load() != tc.attempts {
					t.Fatalf("delete: %v after %d attempts; want a 404: %v, after %d", err, attempts.Load(), tc.wantNotFound, tc.attempts)
				}
			})
		}
	}
}
