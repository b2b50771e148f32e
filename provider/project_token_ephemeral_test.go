package provider

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
)

// tokensNamed counts the tokens the daemon lists under name.
func (d *testDaemon) tokensNamed(name string) (int, error) {
	toks, err := d.c.ListTokens(context.Background())
	if err != nil {
		return 0, err
	}
	n := 0
	for _, tok := range toks {
		if deref(tok.Name) == name {
			n++
		}
	}
	return n, nil
}

// TestAccProjectTokenEphemeral: a CI job mints a short-lived project token, acts
// with it through a provider alias (the sandbox lands in the token's project, which
// the admin token would not have put it in), and neither the token nor its secret
// is stored: the state has no trace of it, and every token minted is revoked at
// the end of its run.
func TestAccProjectTokenEphemeral(t *testing.T) {
	d := startDaemon(t)
	const name = "ephemeral-ci"
	cfg := d.config(fmt.Sprintf(`
ephemeral "differently_project_token" "ci" {
  project     = "eph"
  name        = %q
  ttl_seconds = 600
}

provider "differently" {
  alias    = "ci"
  endpoint = %q
  token    = ephemeral.differently_project_token.ci.secret
}

resource "differently_sandbox" "ci" {
  provider  = differently.ci
  placement = { allowed_pools = ["fake"] }
}`, name, d.url))
	revoked := func(*terraform.State) error {
		n, err := d.tokensNamed(name)
		if err == nil && n != 0 {
			err = fmt.Errorf("%d minted tokens were not revoked", n)
		}
		return err
	}
	accTest(t, resource.TestCase{
		CheckDestroy: resource.ComposeAggregateTestCheckFunc(d.sandboxesGone, revoked),
		Steps: []resource.TestStep{{
			Config: cfg,
			Check: resource.ComposeAggregateTestCheckFunc(
				resource.TestCheckResourceAttr("differently_sandbox.ci", "project", "eph"),
				revoked,
				func(s *terraform.State) error {
					for addr, rs := range s.RootModule().Resources {
						if strings.Contains(addr, "project_token") {
							return fmt.Errorf("%s is in the state", addr)
						}
						for k, v := range rs.Primary.Attributes {
							if strings.HasPrefix(v, "dly_") {
								return fmt.Errorf("%s.%s holds a token secret", addr, k)
							}
						}
					}
					return nil
				},
			),
		}},
	})
}

// A TTL shorter than a run could use is refused at plan time.
func TestAccProjectTokenEphemeralValidation(t *testing.T) {
	d := startDaemon(t)
	accTest(t, resource.TestCase{Steps: []resource.TestStep{{
		Config: d.config(`
ephemeral "differently_project_token" "ci" {
  project     = "eph"
  ttl_seconds = 10
}`),
		PlanOnly:    true,
		ExpectError: regexp.MustCompile(`ttl_seconds`),
	}}})
}
