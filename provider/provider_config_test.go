package provider

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"

	"github.com/different-ai/differently/client"
)

// projectToken issues a token of the default project, for tests that act with less
// than the admin token.
func (d *testDaemon) projectToken(t *testing.T) string {
	t.Helper()
	tok, err := d.c.CreateToken(t.Context(), client.TokenCreate{Scope: client.TokenCreateScopeProject, Project: ptr("default")})
	if err != nil {
		t.Fatal(err)
	}
	return tok.Secret
}

// withToken is config with another token in the provider block.
func (d *testDaemon) withToken(token, body string) string {
	return fmt.Sprintf("provider \"differently\" {\n  endpoint = %q\n  token    = %q\n}\n\n%s", d.url, token, body)
}

// TestCheckToken: the provider's configure-time check accepts an admin and a project
// token and rejects a wrong or revoked one with a diagnostic on the token argument
// that never quotes it.
func TestCheckToken(t *testing.T) {
	d := startDaemon(t)
	project := d.projectToken(t)
	revoked, err := d.c.CreateToken(t.Context(), client.TokenCreate{Scope: client.TokenCreateScopeProject, Project: ptr("default")})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.c.DeleteToken(t.Context(), revoked.Token.Id); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, token string
		wantErr     string
	}{
		{"admin", d.token, ""},
		{"project", project, ""},
		{"wrong", "dly_not-a-token-of-this-daemon", "Differently token rejected"},
		{"revoked", revoked.Secret, "Differently token rejected"},
		{"admin token with a character changed", d.token[:len(d.token)-1] + "x", "Differently token rejected"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := client.New(d.url, tc.token)
			if err != nil {
				t.Fatal(err)
			}
			diags := checkToken(t.Context(), c, d.url, tc.token)
			if tc.wantErr == "" {
				if diags.HasError() {
					t.Fatalf("diagnostics: %v", diags)
				}
				return
			}
			if len(diags) != 1 || diags[0].Summary() != tc.wantErr {
				t.Fatalf("diagnostics %v, want one %q", diags, tc.wantErr)
			}
			if text := diags[0].Summary() + diags[0].Detail(); strings.Contains(text, tc.token) {
				t.Fatalf("the diagnostic quotes the token: %s", text)
			}
			if !strings.Contains(diags[0].Detail(), d.url) || !strings.Contains(diags[0].Detail(), EnvToken) {
				t.Fatalf("the diagnostic does not say which daemon and which setting: %s", diags[0].Detail())
			}
		})
	}
}

// A wrong token fails the plan at the provider, before any resource or data source
// is read.
func TestAccProviderWrongToken(t *testing.T) {
	d := startDaemon(t)
	accTest(t, resource.TestCase{
		Steps: []resource.TestStep{{
			Config:      d.withToken("dly_wrong", `data "differently_pools" "all" {}`),
			PlanOnly:    true,
			ExpectError: regexp.MustCompile(`Differently token rejected`),
		}},
	})
}

// A failed create says what it was doing: a project token may not declare a project
// or create a profile, and the error names the create, not a read.
func TestAccErrorsSayWhatFailed(t *testing.T) {
	d := startDaemon(t)
	tok := d.projectToken(t)
	for _, tc := range []struct{ name, body, want string }{
		{"project", `resource "differently_project" "ci" {
  name = "ci"
}`, `Declaring project default/ci`},
		{"profile", `resource "differently_profile" "ci" {
  name = "ci"
}`, `Creating profile ci`},
		{"pool", `resource "differently_pool" "p" {
  name    = "p"
  adapter = "fake"
}`, `Creating pool p`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			accTest(t, resource.TestCase{
				Steps: []resource.TestStep{{
					Config:      d.withToken(tok, tc.body),
					ExpectError: regexp.MustCompile(tc.want),
				}},
			})
		})
	}
}
