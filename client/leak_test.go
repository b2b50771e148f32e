package client_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/client"
)

// TestAPIErrorsNeverQuoteTheToken: an answer that quotes the request (a proxy's
// error page, an envelope's message or details) gives an APIError without the
// client's token, not even a piece of it cut at the message's length limit.
func TestAPIErrorsNeverQuoteTheToken(t *testing.T) {
	const token = "dly_client-secret/token+0123456789"
	answers := map[string]func(w http.ResponseWriter, auth string){
		"page": func(w http.ResponseWriter, auth string) {
			w.WriteHeader(http.StatusBadGateway)
			_, _ = io.WriteString(w, "<html>upstream refused "+auth+"</html>")
		},
		"page cut across the token": func(w http.ResponseWriter, auth string) {
			w.WriteHeader(http.StatusBadGateway)
			_, _ = io.WriteString(w, strings.Repeat("p", 490)+auth)
		},
		"envelope": func(w http.ResponseWriter, auth string) {
			w.WriteHeader(http.StatusUnauthorized)
			_ = json.NewEncoder(w).Encode(api.ErrorEnvelope{Error: api.Errorf(api.CodeUnauthenticated, "%s refused", auth).
				WithDetail("headers", map[string]any{"Authorization": []any{auth}})})
		},
	}
	// The client reads client.MaxErrorBody bytes of an answer: blanks, then the echoed
	// header or token (as sent, or escaped as in a URL) cut at each length from 4
	// bytes on, leave the piece before the cut at the message's very start (the
	// blanks are trimmed).
	auth := "Bearer " + token
	for _, echo := range []string{auth, token, url.QueryEscape(auth)} {
		for n := 4; n < len(echo); n++ {
			answers[fmt.Sprintf("cut at the read limit after %q", echo[:n])] = func(w http.ResponseWriter, _ string) {
				w.WriteHeader(http.StatusBadGateway)
				_, _ = io.WriteString(w, strings.Repeat(" ", client.MaxErrorBody-n)+echo+" more")
			}
		}
	}
	for name, answer := range answers {
		t.Run(name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				answer(w, r.Header.Get("Authorization"))
			}))
			defer srv.Close()
			c, err := client.New(srv.URL, token, client.WithRetry(1, 0, 0))
			if err != nil {
				t.Fatal(err)
			}
			_, err = c.GetSandbox(t.Context(), "sbx_1")
			var ae *client.APIError
			if !errors.As(err, &ae) {
				t.Fatalf("%v is not an APIError", err)
			}
			text := fmt.Sprintf("%v %s %v", err, ae.Message, ae.Details)
			for i := 0; i+8 <= len(token); i++ {
				if strings.Contains(text, token[i:i+8]) {
					t.Fatalf("the error quotes %q of the token: %s", token[i:i+8], text)
				}
			}
			for _, start := range []string{auth[:4], token[:4]} {
				if strings.Contains(text, start) {
					t.Fatalf("the error quotes the start of a secret, %q: %s", start, text)
				}
			}
		})
	}
}
