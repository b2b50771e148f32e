package provider

import (
	"context"
	"fmt"
	"regexp"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"

	"github.com/different-ai/differently/client"
)

func TestAccProjectToken(t *testing.T) {
	d := startDaemon(t)
	addr := "differently_project_token.ci"
	var tokID string
	cfg := func(name string) string {
		return d.config(fmt.Sprintf(`
resource "differently_project_token" "ci" {
  project = "ci"
  name    = %q
}`, name))
	}
	gone := func(id string) error {
		toks, err := d.c.ListTokens(context.Background())
		if err != nil {
			return err
		}
		for _, tok := range toks {
			if tok.Id == id {
				return fmt.Errorf("token %s still exists", id)
			}
		}
		return nil
	}
	accTest(t, resource.TestCase{
		CheckDestroy: func(*terraform.State) error { return gone(tokID) },
		Steps: []resource.TestStep{
			{
				Config: cfg("ci runners"),
				Check: resource.ComposeAggregateTestCheckFunc(
					func(s *terraform.State) error { tokID = stateID(s, addr); return nil },
					resource.TestCheckResourceAttr(addr, "org", "default"),
					resource.TestMatchResourceAttr(addr, "secret", regexp.MustCompile(`^dly_`)),
					// The secret works, and only for its project.
					func(s *terraform.State) error {
						secret := s.RootModule().Resources[addr].Primary.Attributes["secret"]
						pc, err := client.New(d.url, secret)
						if err != nil {
							return err
						}
						_, err = pc.ListSandboxes(context.Background(), nil)
						if err != nil {
							return fmt.Errorf("project token refused: %w", err)
						}
						if _, err := pc.ListPools(context.Background()); err == nil {
							return fmt.Errorf("a project token listed pools")
						}
						return nil
					},
				),
			},
			{ResourceName: addr, ImportState: true, ImportStateVerify: true, ImportStateVerifyIgnore: []string{"secret"}},
			{
				// Any change issues a new token and revokes the old one.
				Config: cfg("ci runners v2"),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(addr, plancheck.ResourceActionDestroyBeforeCreate),
				}},
				Check: func(s *terraform.State) error {
					old := tokID
					tokID = stateID(s, addr)
					return gone(old)
				},
			},
			{
				// Revoked out of band: issued again.
				PreConfig: func() {
					if err := d.c.DeleteToken(context.Background(), tokID); err != nil {
						t.Fatal(err)
					}
				},
				Config: cfg("ci runners v2"),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(addr, plancheck.ResourceActionCreate),
				}},
				Check: func(s *terraform.State) error { tokID = stateID(s, addr); return nil },
			},
		},
	})
}
