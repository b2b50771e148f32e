package provider

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"

	"github.com/different-ai/differently/client"
)

func stateID(s *terraform.State, addr string) string {
	if rs, ok := s.RootModule().Resources[addr]; ok {
		return rs.Primary.ID
	}
	return ""
}

func TestAccSnapshot(t *testing.T) {
	d := startDaemon(t)
	addr := "differently_snapshot.base"
	var snapID string
	cfg := d.config(`
resource "differently_sandbox" "src" {
  placement     = { allowed_pools = ["devhost"] }
  init_commands = ["echo baked > baked.txt"]
}

resource "differently_snapshot" "base" {
  sandbox_id = differently_sandbox.src.id
}

resource "differently_sandbox" "restored" {
  from_snapshot = differently_snapshot.base.id
}`)
	accTest(t, resource.TestCase{
		CheckDestroy: func(s *terraform.State) error {
			if _, err := d.c.GetSnapshot(context.Background(), snapID); !client.IsNotFound(err) {
				return fmt.Errorf("snapshot %s still exists (err %v)", snapID, err)
			}
			return d.sandboxesGone(s)
		},
		Steps: []resource.TestStep{
			{
				Config: cfg,
				Check: resource.ComposeAggregateTestCheckFunc(
					func(s *terraform.State) error { snapID = stateID(s, addr); return nil },
					resource.TestMatchResourceAttr(addr, "id", regexp.MustCompile(`^snap_`)),
					resource.TestCheckResourceAttr(addr, "kind", "disk"),
					resource.TestCheckResourceAttr(addr, "pool", "devhost"),
					resource.TestCheckResourceAttrSet(addr, "size_bytes"),
					resource.TestCheckResourceAttrPair(addr, "sandbox_id", "differently_sandbox.src", "id"),
					resource.TestCheckResourceAttr("differently_sandbox.restored", "pool", "devhost"),
					// The restored sandbox has the snapshot's files.
					func(s *terraform.State) error {
						res, err := d.c.ExecSandbox(context.Background(), stateID(s, "differently_sandbox.restored"),
							client.ExecRequest{Command: "cat baked.txt"})
						if err != nil {
							return err
						}
						if res.Stdout != "baked\n" {
							return fmt.Errorf("restored sandbox has %q", res.Stdout)
						}
						return nil
					},
				),
			},
			{ResourceName: addr, ImportState: true, ImportStateVerify: true},
			{
				// Deleted out of band: taken again, and the sandbox restored from it
				// is replaced, since from_snapshot changes.
				PreConfig: func() {
					if err := d.c.DeleteSnapshot(context.Background(), snapID); err != nil {
						t.Fatal(err)
					}
				},
				Config: cfg,
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(addr, plancheck.ResourceActionCreate),
				}},
				Check: func(s *terraform.State) error { snapID = stateID(s, addr); return nil },
			},
		},
	})
}

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

func TestAccDataSources(t *testing.T) {
	d := startDaemon(t)
	// Dev mode adds the local pool where this host can run bwrap; the data sources
	// must list whatever the daemon has.
	all, err := d.c.ListPools(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	nPools := strconv.Itoa(len(all))
	accTest(t, resource.TestCase{
		CheckDestroy: d.sandboxesGone,
		Steps: []resource.TestStep{{
			Config: d.config(`
resource "differently_sandbox" "s" {
  placement     = { allowed_pools = ["fake"] }
  labels        = { purpose = "data-source-test" }
  init_commands = ["true"]
}

data "differently_pool" "devhost" {
  name = "devhost"
}

data "differently_pools" "all" {}

data "differently_trust_report" "t" {}

data "differently_sandbox" "s" {
  id = differently_sandbox.s.id
}

resource "differently_profile" "p" {
  name         = "ds-profile"
  capabilities = ["exec", "files"]
  template     = "ubuntu"
  ttl_seconds  = 3600
}

resource "differently_sandbox" "from_profile" {
  profile   = differently_profile.p.name
  placement = { allowed_pools = ["fake"] }
}

data "differently_sandbox" "from_profile" {
  id = differently_sandbox.from_profile.id
}`),
			Check: resource.ComposeAggregateTestCheckFunc(
				resource.TestCheckResourceAttr("data.differently_pool.devhost", "adapter", "devhost"),
				resource.TestCheckResourceAttr("data.differently_pool.devhost", "region", "local"),
				resource.TestCheckResourceAttr("data.differently_pool.devhost", "healthy", "true"),
				resource.TestCheckResourceAttrSet("data.differently_pool.devhost", "config.root"),
				resource.TestCheckResourceAttr("data.differently_pools.all", "pools.#", nPools),
				resource.TestCheckResourceAttr("data.differently_pools.all", "pools.0.name", "devhost"),
				resource.TestCheckResourceAttr("data.differently_pools.all", "pools.1.config_json", "{}"),
				resource.TestCheckResourceAttr("data.differently_trust_report.t", "allow_external", "false"),
				resource.TestCheckResourceAttr("data.differently_trust_report.t", "pools.#", nPools),
				resource.TestCheckResourceAttr("data.differently_trust_report.t", "pools.1.receives_work", "true"),
				resource.TestCheckResourceAttr("data.differently_sandbox.s", "state", "running"),
				resource.TestCheckResourceAttr("data.differently_sandbox.s", "pool", "fake"),
				resource.TestCheckResourceAttr("data.differently_sandbox.s", "labels.purpose", "data-source-test"),
				resource.TestCheckResourceAttr("data.differently_sandbox.s", "init_commands.0", "true"),
				resource.TestCheckNoResourceAttr("data.differently_sandbox.from_profile", "init_commands.#"),
				// What the profile filled in is what the sandbox has.
				resource.TestCheckResourceAttr("data.differently_sandbox.from_profile", "template", "ubuntu"),
				resource.TestCheckResourceAttr("data.differently_sandbox.from_profile", "ttl_seconds", "3600"),
				resource.TestCheckTypeSetElemAttr("data.differently_sandbox.from_profile", "capabilities.*", "files"),
			),
		}},
	})
}
