package adapterhttp_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/adapters/adapterhttp"
	"github.com/different-ai/differently/api"
)

// echoToken is a plugin (or a proxy in front of one) that quotes the Authorization
// header it was sent back to the client, in every place an answer has room for text.
func echoToken(mode string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		auth := r.Header.Get("Authorization")
		envelope := func(status int, code api.Code) {
			w.Header().Set(adapterhttp.ProtocolHeader, adapters.ProtocolVersion)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			e := api.Errorf(code, "request with %s refused", auth).WithDetail("headers", map[string]any{"Authorization": []any{auth}})
			_ = json.NewEncoder(w).Encode(api.ErrorEnvelope{Error: e})
		}
		switch mode {
		case "401":
			envelope(http.StatusUnauthorized, api.CodeUnauthenticated)
		case "403":
			envelope(http.StatusForbidden, api.CodeForbidden)
		case "404":
			envelope(http.StatusNotFound, api.CodeNotFound)
		case "500":
			envelope(http.StatusInternalServerError, api.CodeInternal)
		case "503":
			envelope(http.StatusServiceUnavailable, api.CodeProviderUnavailable)
		case "proxy":
			w.WriteHeader(http.StatusBadGateway)
			_, _ = io.WriteString(w, "upstream refused "+auth)
		case "protocol":
			w.Header().Set(adapterhttp.ProtocolHeader, auth)
			_, _ = io.WriteString(w, "{}")
		case "malformed":
			w.Header().Set(adapterhttp.ProtocolHeader, adapters.ProtocolVersion)
			_, _ = io.WriteString(w, `{"kind":"`+auth)
		case "stream":
			w.Header().Set(adapterhttp.ProtocolHeader, adapters.ProtocolVersion)
			w.Header().Set("Content-Type", "application/x-ndjson")
			_, _ = fmt.Fprintf(w, "{\"stream\":\"stdout\",\"data\":\"x\"}\n{\"error\":%q}\n", "lost "+auth)
		case "text":
			// Answers that succeed but carry the token in their text fields.
			w.Header().Set(adapterhttp.ProtocolHeader, adapters.ProtocolVersion)
			w.Header().Set("Content-Type", "application/json")
			inst := adapters.Instance{Ref: "r", SandboxID: "sbx_1", State: adapters.StateError, Message: "failed for " + auth}
			switch {
			case r.URL.Path == adapterhttp.BasePath+"/info":
				_ = json.NewEncoder(w).Encode(map[string]any{"info": adapters.Info{Kind: "k " + auth, Version: auth,
					Isolation: auth, Protocol: adapters.ProtocolVersion, Description: "sent " + auth}})
			case r.URL.Path == adapterhttp.BasePath+"/instances" && r.Method == http.MethodGet:
				_ = json.NewEncoder(w).Encode([]adapters.Instance{inst})
			default:
				_ = json.NewEncoder(w).Encode(inst)
			}
		}
	}
}

// TestClientNeverPassesOnTheToken: whatever a remote answers, in errors, their details
// or the text of successful answers, the client's token does not come out of the
// client, in any form.
func TestClientNeverPassesOnTheToken(t *testing.T) {
	const token = "plugin-token/with+chars<&>-7f3a9c2e"
	for _, mode := range []string{"401", "403", "404", "500", "503", "proxy", "protocol", "malformed", "stream", "text"} {
		t.Run(mode, func(t *testing.T) {
			srv := httptest.NewServer(echoToken(mode))
			t.Cleanup(srv.Close)
			c, err := adapterhttp.NewClient(srv.URL, token)
			if err != nil {
				t.Fatal(err)
			}
			ctx := t.Context()
			var said []string
			note := func(v any, err error) {
				said = append(said, fmt.Sprintf("%+v", v))
				if err != nil {
					said = append(said, err.Error())
					if e := api.AsError(err); e != nil {
						said = append(said, e.Message, fmt.Sprintf("%v", e.Details))
					}
				}
			}
			note(c.Capabilities(ctx))
			note(c.Info(), c.Health(ctx))
			note(c.Create(ctx, adapters.CreateRequest{ID: "sbx_1", Installation: "i"}))
			note(c.Get(ctx, "r"))
			note(c.List(ctx, "i"))
			note(c.Exec(ctx, "r", api.ExecRequest{Command: "x"}))
			note(c.ExecStream(ctx, "r", api.ExecRequest{Command: "x"}, func(api.ExecEvent) error { return nil }))
			_, err = c.ReadFile(ctx, "r", "/f") // the bytes are the file's, not words
			note(nil, err)
			note(nil, c.WriteFile(ctx, "r", "/f", []byte("x")))
			note(c.ListFiles(ctx, "r", "/"))
			note(nil, c.Stop(ctx, "r"))
			note(c.Snapshot(ctx, "r", adapters.SnapshotDisk))
			note(c.ExposePort(ctx, "r", 80))
			note(nil, c.Delete(ctx, "r"))
			all := strings.Join(said, "\n")
			for _, form := range []string{token, "Bearer " + token, "plugin-token", "7f3a9c2e", `\u003c\u0026\u003e-7f3a`} {
				for _, line := range said {
					if strings.Contains(line, form) {
						t.Fatalf("the client passed on %q: %s", form, line)
					}
				}
			}
			if !strings.Contains(all, adapters.Redacted) && mode != "proxy" && mode != "malformed" {
				t.Fatalf("nothing was redacted, so the echo never reached the client:\n%s", all)
			}
		})
	}
}
