package client_test

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

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

// TestAPIErrorMessageCutOnARuneBoundary: a long page is cut to 512 bytes for the
// message without splitting a character, wherever the limit falls in one.
func TestAPIErrorMessageCutOnARuneBoundary(t *testing.T) {
	for _, lead := range []string{"", "x", "xx", "xxx"} {
		t.Run(fmt.Sprintf("after %d bytes", len(lead)), func(t *testing.T) {
			// Characters of 1 to 4 bytes, so that the limit falls inside one of them.
			page := lead + strings.Repeat("aé€😀", 100)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(http.StatusBadGateway)
				_, _ = io.WriteString(w, page)
			}))
			defer srv.Close()
			var w waits
			_, err := newTestClient(t, srv.URL, &w, client.WithRetry(1, 0, 0)).GetSandbox(t.Context(), "sbx_1")
			var ae *client.APIError
			if !errors.As(err, &ae) {
				t.Fatalf("%v is not an APIError", err)
			}
			cut, ok := strings.CutSuffix(ae.Message, "…")
			if !ok || !utf8.ValidString(cut) || !strings.HasPrefix(page, cut) || len(cut) > 512 || len(cut) < 512-3 {
				t.Fatalf("message of %d bytes, valid UTF-8: %v: %q", len(ae.Message), utf8.ValidString(ae.Message), ae.Message)
			}
		})
	}
}
