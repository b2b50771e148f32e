package conformance_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/adapters/adapterhttp"
	"github.com/different-ai/differently/adapters/conformance"
)

const httpToken = "conformance-token"

func TestHTTPChecksPassRealHandlers(t *testing.T) {
	tests := []struct {
		name    string
		adapter func(t *testing.T) adapters.ExecutionAdapter
	}{
		{"fake", newFake},
		{"devhost", newDevhost},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(adapterhttp.Handler(tt.adapter(t), httpToken))
			t.Cleanup(srv.Close)
			conformance.TestHTTP(t, srv.URL, httpToken, conformance.Options{})
		})
	}
}

func TestHTTPChecksSkipAuthWithoutToken(t *testing.T) {
	srv := httptest.NewServer(adapterhttp.Handler(newFake(t), ""))
	t.Cleanup(srv.Close)
	report := conformance.RunHTTP(t.Context(), srv.URL, "", conformance.Options{})
	if report.Failed() {
		t.Fatalf("tokenless handler fails: %+v", report.Results)
	}
	for _, r := range report.Results {
		if strings.HasPrefix(r.Name, "http/auth/") && (r.Status != conformance.Skip || !strings.Contains(r.Message, "no token")) {
			t.Errorf("%s: %s %q, want a skip that says no token was given", r.Name, r.Status, r.Message)
		}
	}
}

// Each case serves one protocol defect and names the raw check that must fail.
func TestHTTPChecksFailBrokenServers(t *testing.T) {
	withToken := func(t *testing.T) http.Handler { return adapterhttp.Handler(newFake(t), httpToken) }
	tests := []struct {
		name    string
		handler func(t *testing.T) http.Handler
		failing []string
	}{
		{"accepts requests without the token",
			func(t *testing.T) http.Handler { return adapterhttp.Handler(newFake(t), "") },
			[]string{"http/auth/no-token", "http/auth/wrong-token"}},
		{"info and health are open", func(t *testing.T) http.Handler {
			open, closed := adapterhttp.Handler(newFake(t), ""), withToken(t)
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if strings.HasSuffix(r.URL.Path, "/info") || strings.HasSuffix(r.URL.Path, "/health") {
					open.ServeHTTP(w, r)
					return
				}
				closed.ServeHTTP(w, r)
			})
		}, []string{"http/auth/no-token", "http/auth/wrong-token"}},
		{"401 in plain text without the protocol header", func(t *testing.T) http.Handler {
			inner := withToken(t)
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Header.Get("Authorization") != "Bearer "+httpToken {
					http.Error(w, "unauthorized", http.StatusUnauthorized)
					return
				}
				inner.ServeHTTP(w, r)
			})
		}, []string{"http/auth/no-token", "http/auth/wrong-token"}},
		{"unknown path is the mux's plain 404", func(t *testing.T) http.Handler {
			inner := withToken(t)
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if strings.Contains(r.URL.Path, "no-such-route") {
					w.Header().Set(adapterhttp.ProtocolHeader, adapters.ProtocolVersion)
					http.NotFound(w, r)
					return
				}
				inner.ServeHTTP(w, r)
			})
		}, []string{"http/unknown-path"}},
		{"delete of missing is 404", func(t *testing.T) http.Handler {
			return adapterhttp.Handler(strictDelete{newFake(t)}, httpToken)
		}, []string{"http/delete-missing"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(tt.handler(t))
			t.Cleanup(srv.Close)
			report := conformance.RunHTTP(t.Context(), srv.URL, httpToken, conformance.Options{})
			status := map[string]conformance.Result{}
			for _, r := range report.Results {
				status[r.Name] = r
			}
			for _, name := range tt.failing {
				r, ok := status[name]
				if !ok {
					t.Fatalf("no check named %s", name)
				}
				if r.Status != conformance.Fail {
					t.Errorf("check %s: %s (%s), want fail", name, r.Status, r.Message)
				}
			}
		})
	}
}
