package provider

import (
	"context"
	"fmt"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"

	"github.com/different-ai/differently/client"
)

func TestAccPolicy(t *testing.T) {
	d := startDaemon(t)
	addr := "differently_policy.this"
	accTest(t, resource.TestCase{
		// Destroying the singleton resets it to its defaults.
		CheckDestroy: func(*terraform.State) error {
			p, err := d.c.GetPolicy(context.Background())
			if err != nil {
				return err
			}
			if deref(p.AllowExternal) || len(deref(p.ExternalPools)) != 0 || len(deref(p.Defaults)) != 0 {
				return fmt.Errorf("policy not reset: %+v", p)
			}
			return nil
		},
		Steps: []resource.TestStep{
			{
				Config: d.config(`
resource "differently_policy" "this" {
  allow_external = true
  external_pools = ["ext-a"]
}`),
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestCheckResourceAttr(addr, "id", "policy"),
					resource.TestCheckResourceAttr(addr, "allow_external", "true"),
					resource.TestCheckResourceAttr(addr, "external_pools.#", "1"),
					resource.TestCheckNoResourceAttr(addr, "defaults"),
				),
			},
			{
				// The ID is ignored: there is one policy.
				ResourceName:      addr,
				ImportState:       true,
				ImportStateId:     "anything",
				ImportStateVerify: true,
			},
			{
				Config: d.config(`
resource "differently_policy" "this" {
  allow_external = true
  external_pools = ["ext-b", "ext-a"]
  defaults       = { ttlSeconds = 3600, labels = { team = "infra" } }
}`),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(addr, plancheck.ResourceActionUpdate),
				}},
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestCheckResourceAttr(addr, "external_pools.#", "2"),
					resource.TestCheckResourceAttr(addr, "defaults.ttlSeconds", "3600"),
					resource.TestCheckResourceAttr(addr, "defaults.labels.team", "infra"),
				),
			},
			{
				// Changed through the admin API: the plan puts it back.
				PreConfig: func() {
					if _, err := d.c.PutPolicy(context.Background(), client.Policy{AllowExternal: ptr(false)}); err != nil {
						t.Fatal(err)
					}
				},
				Config: d.config(`
resource "differently_policy" "this" {
  allow_external = true
  external_pools = ["ext-b", "ext-a"]
  defaults       = { ttlSeconds = 3600, labels = { team = "infra" } }
}`),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(addr, plancheck.ResourceActionUpdate),
				}},
				Check: func(*terraform.State) error {
					p, err := d.c.GetPolicy(context.Background())
					if err != nil {
						return err
					}
					if !deref(p.AllowExternal) || len(deref(p.ExternalPools)) != 2 {
						return fmt.Errorf("policy not restored: %+v", p)
					}
					return nil
				},
			},
			{
				// Defaults left out: every field back to its default.
				Config: d.config(`resource "differently_policy" "this" {}`),
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestCheckResourceAttr(addr, "allow_external", "false"),
					resource.TestCheckResourceAttr(addr, "external_pools.#", "0"),
					resource.TestCheckNoResourceAttr(addr, "defaults"),
				),
			},
		},
	})
}
