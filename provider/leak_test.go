package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	fwprovider "github.com/hashicorp/terraform-plugin-framework/provider"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-go/tftypes"

	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/client"
)

// echoServer is a daemon, or a proxy before it, that quotes the Authorization header
// it got in every answer: as a plain page, in an envelope's message and details.
func echoServer(t *testing.T, status int, envelope bool) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth := r.Header.Get("Authorization")
		w.WriteHeader(status)
		if !envelope {
			_, _ = io.WriteString(w, "<html>bad gateway; request headers: Authorization: "+auth+"</html>")
			return
		}
		_ = json.NewEncoder(w).Encode(api.ErrorEnvelope{Error: api.Errorf(api.CodeUnauthenticated, "token %s refused", auth).
			WithDetail("authorization", auth)})
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func diagText(d diag.Diagnostics) string {
	var b strings.Builder
	for _, x := range d {
		fmt.Fprintf(&b, "%s: %s\n", x.Summary(), x.Detail())
	}
	return b.String()
}

// TestDiagnosticsNeverQuoteTheToken: whatever a daemon or a proxy echoes, the token
// does not reach Terraform's diagnostics, from configuring the provider or from a
// resource's API error.
func TestDiagnosticsNeverQuoteTheToken(t *testing.T) {
	const token = "dly_provider-secret-token-0123456789"
	ctx := context.Background()
	for _, tc := range []struct {
		status   int
		envelope bool
	}{{http.StatusBadGateway, false}, {http.StatusServiceUnavailable, true}, {http.StatusUnauthorized, true}} {
		endpoint := echoServer(t, tc.status, tc.envelope)

		p := New("test")()
		var schema fwprovider.SchemaResponse
		p.Schema(ctx, fwprovider.SchemaRequest{}, &schema)
		raw := tftypes.NewValue(schema.Schema.Type().TerraformType(ctx), map[string]tftypes.Value{
			"endpoint": tftypes.NewValue(tftypes.String, endpoint),
			"token":    tftypes.NewValue(tftypes.String, token),
		})
		var resp fwprovider.ConfigureResponse
		p.Configure(ctx, fwprovider.ConfigureRequest{Config: tfsdk.Config{Schema: schema.Schema, Raw: raw}}, &resp)
		text := diagText(resp.Diagnostics)
		if !resp.Diagnostics.HasError() || strings.Contains(text, "provider-secret") {
			t.Fatalf("configure against %d: %s", tc.status, text)
		}

		c, err := client.New(endpoint, token, client.WithRetry(1, 0, 0))
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.GetSandbox(ctx, "sbx_1")
		if msg := apiError(err); err == nil || strings.Contains(msg, "provider-secret") {
			t.Fatalf("API error against %d: %s", tc.status, msg)
		}
	}
}
