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
	"github.com/different-ai/differently/server/config"
)

func TestAccPool(t *testing.T) {
	d := startDaemon(t)
	const name = "acc-fake"
	addr := "differently_pool.test"
	accTest(t, resource.TestCase{
		CheckDestroy: func(*terraform.State) error {
			if _, err := d.c.GetPool(context.Background(), name); !client.IsNotFound(err) {
				return fmt.Errorf("pool %s still exists (err %v)", name, err)
			}
			return nil
		},
		Steps: []resource.TestStep{
			{
				Config: d.config(`
resource "differently_pool" "test" {
  name            = "acc-fake"
  adapter         = "fake"
  region          = "eu-west"
  max_concurrency = 3
  cost_model      = { cpu_hour = 0.5 }
  config = {
    createErrors = ["sandbox_failed"]
    totalCPU     = 8
    templates    = ["ubuntu", "alpine"]
  }
  features = ["exec", "files", "lifecycle.stop-start"]
}`),
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestCheckResourceAttr(addr, "id", name),
					resource.TestCheckResourceAttr(addr, "trust", "private"),
					resource.TestCheckResourceAttr(addr, "max_starting", "0"),
					resource.TestCheckResourceAttr(addr, "cost_model.cpu_hour", "0.5"),
					resource.TestCheckResourceAttr(addr, "cost_model.memory_gib_hour", "0"),
					resource.TestCheckResourceAttr(addr, "config.createErrors.0", "sandbox_failed"),
					resource.TestCheckResourceAttr(addr, "config.totalCPU", "8"),
					resource.TestCheckResourceAttr(addr, "features.#", "3"),
					resource.TestCheckResourceAttr(addr, "healthy", "true"),
					resource.TestCheckResourceAttr(addr, "source", "api"),
					resource.TestCheckTypeSetElemAttr(addr, "effective_features.*", "lifecycle.stop-start"),
					func(*terraform.State) error {
						p, err := d.c.GetPool(context.Background(), name)
						if err != nil {
							return err
						}
						if p.MaxConcurrency != 3 || p.Config["totalCPU"] != float64(8) {
							return fmt.Errorf("daemon has %+v", p)
						}
						return nil
					},
				),
			},
			{
				ResourceName:      addr,
				ImportState:       true,
				ImportStateId:     name,
				ImportStateVerify: true,
			},
			{
				// Updates go through PUT: the configuration is the whole definition.
				Config: d.config(`
resource "differently_pool" "test" {
  name            = "acc-fake"
  adapter         = "fake"
  trust           = "external"
  max_concurrency = 5
  max_starting    = 2
  config = {
    createErrors = ["sandbox_failed", "internal"]
    regions      = ["eu-west"]
  }
  credentials_env = "ACC_FAKE_TOKEN"
}`),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(addr, plancheck.ResourceActionUpdate),
				}},
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestCheckResourceAttr(addr, "trust", "external"),
					resource.TestCheckNoResourceAttr(addr, "region"),
					resource.TestCheckNoResourceAttr(addr, "features"),
					resource.TestCheckResourceAttr(addr, "config.createErrors.1", "internal"),
					resource.TestCheckNoResourceAttr(addr, "config.totalCPU"),
					resource.TestCheckResourceAttr(addr, "cost_model.cpu_hour", "0"),
					resource.TestCheckResourceAttr(addr, "credentials_env", "ACC_FAKE_TOKEN"),
				),
			},
			{
				// An operator edits the pool through the admin API: the plan shows the
				// difference and apply restores the configuration.
				PreConfig: func() {
					_, err := d.c.PatchPool(context.Background(), name, client.PoolPatch{
						MaxConcurrency: ptr(9),
						Config:         &map[string]any{"createErrors": []any{}},
						Features:       &[]string{"exec"},
					})
					if err != nil {
						t.Fatal(err)
					}
				},
				Config: d.config(`
resource "differently_pool" "test" {
  name            = "acc-fake"
  adapter         = "fake"
  trust           = "external"
  max_concurrency = 5
  max_starting    = 2
  config = {
    createErrors = ["sandbox_failed", "internal"]
    regions      = ["eu-west"]
  }
  credentials_env = "ACC_FAKE_TOKEN"
}`),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(addr, plancheck.ResourceActionUpdate),
				}},
				Check: func(*terraform.State) error {
					p, err := d.c.GetPool(context.Background(), name)
					if err != nil {
						return err
					}
					if p.MaxConcurrency != 5 || len(p.Features) != 0 || len(p.Config["createErrors"].([]any)) != 2 {
						return fmt.Errorf("apply did not restore the pool: %+v", p)
					}
					return nil
				},
			},
			{
				// Deleted out of band: removed from the state on refresh, created again.
				PreConfig: func() {
					if err := d.c.DeletePool(context.Background(), name, false); err != nil {
						t.Fatal(err)
					}
				},
				Config: d.config(`
resource "differently_pool" "test" {
  name    = "acc-fake"
  adapter = "fake"
}`),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(addr, plancheck.ResourceActionCreate),
				}},
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestCheckNoResourceAttr(addr, "config"),
					resource.TestCheckResourceAttr(addr, "max_concurrency", "0"),
				),
			},
			{
				// The drift test in the way the issue words it: the plan alone is not empty.
				PreConfig: func() {
					if _, err := d.c.PatchPool(context.Background(), name, client.PoolPatch{Region: ptr("moon")}); err != nil {
						t.Fatal(err)
					}
				},
				Config: d.config(`
resource "differently_pool" "test" {
  name    = "acc-fake"
  adapter = "fake"
}`),
				PlanOnly:           true,
				ExpectNonEmptyPlan: true,
			},
		},
	})
}

// A pool of the daemon's config file shows as such, and Terraform cannot take it
// over: creating a resource of its name fails, saying where the pool is defined.
func TestAccPoolFromConfigFile(t *testing.T) {
	cfg, err := config.Parse([]byte("pools:\n  - name: filed\n    adapter: fake\n"))
	if err != nil {
		t.Fatal(err)
	}
	d := startDaemonWith(t, cfg)
	accTest(t, resource.TestCase{
		Steps: []resource.TestStep{
			{
				Config: d.config(`
data "differently_pool" "filed" {
  name = "filed"
}

data "differently_pools" "all" {}
`),
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestCheckResourceAttr("data.differently_pool.filed", "source", "config"),
					resource.TestCheckTypeSetElemNestedAttrs("data.differently_pools.all", "pools.*",
						map[string]string{"name": "filed", "source": "config"}),
					resource.TestCheckTypeSetElemNestedAttrs("data.differently_pools.all", "pools.*",
						map[string]string{"name": "fake", "source": "api"}),
				),
			},
			{
				Config: d.config(`
resource "differently_pool" "filed" {
  name    = "filed"
  adapter = "fake"
}`),
				ExpectError: regexp.MustCompile(`defined in the daemon's\s+config file`),
			},
		},
	})
}
