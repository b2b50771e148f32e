package client_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/different-ai/differently/client"
)

// TestAPIErrorRetryAfter: an answer's Retry-After reaches the caller in the APIError,
// from a call that is not retried (a create without an idempotency key), as seconds
// or as a date read against the answer's own Date, so the client's clock does not
// matter.
func TestAPIErrorRetryAfter(t *testing.T) {
	date := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tc := range []struct {
		name   string
		header http.Header
		want   time.Duration
	}{
		{"seconds", http.Header{"Retry-After": {"5"}}, 5 * time.Second},
		{"date", http.Header{"Date": {date.Format(http.TimeFormat)}, "Retry-After": {date.Add(7 * time.Second).Format(http.TimeFormat)}}, 7 * time.Second},
		{"none", http.Header{}, 0},
		{"not a delay", http.Header{"Retry-After": {"soon"}}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				for k, v := range tc.header {
					w.Header()[k] = v
				}
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusServiceUnavailable)
				_, _ = w.Write([]byte(`{"error":{"code":"provider_unavailable","message":"the queue is full"}}`))
			}))
			defer srv.Close()
			var w waits
			c := newTestClient(t, srv.URL, &w)
			_, err := c.CreateSandbox(t.Context(), client.SandboxCreate{}, "")
			var ae *client.APIError
			if !errors.As(err, &ae) || ae.Status != http.StatusServiceUnavailable || ae.RetryAfter != tc.want {
				t.Fatalf("error %#v, want a 503 with RetryAfter %v", err, tc.want)
			}
		})
	}
}
