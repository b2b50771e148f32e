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
