package provider

import (
	"context"
	"fmt"
	"regexp"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"

	"github.com/different-ai/differently/client"
)

// TestAccSandboxCreateTimeout: a pool whose creates take fifteen seconds, a create
// timeout of two. Either way the sandbox's ID is in the state and destroy terminates
// it: nothing is orphaned. A sandbox with nothing left to do but start is kept with
// a warning, and a plan leaves it alone; one whose init_commands never ran fails the
// apply, naming the timeout, and is tainted, so the next plan replaces it. The
// two-second wait is the behaviour under test. Destroy takes the rest of the fifteen
// seconds: the daemon terminates a sandbox deleted while provisioning once the
// adapter's create returns.
func TestAccSandboxCreateTimeout(t *testing.T) {
	for _, c := range []struct {
		name, extra string
		tainted     bool
	}{
		{name: "kept"},
		{name: "init_commands", extra: `init_commands = ["true"]`, tainted: true},
	} {
		t.Run(c.name, func(t *testing.T) { testCreateTimeout(t, c.extra, c.tainted) })
	}
}

func testCreateTimeout(t *testing.T, extra string, tainted bool) {
	d := startDaemon(t)
	addr := "differently_sandbox.slow"
	cfg := d.config(`
resource "differently_pool" "slow" {
  name    = "slow"
  adapter = "fake"
  config  = { createLatencyMs = 15000 }
}

resource "differently_sandbox" "slow" {
  placement = { allowed_pools = [differently_pool.slow.name] }
  timeouts  = { create = "2s", delete = "5m" }
  ` + extra + `
}`)
	// inPool lists the sandboxes placed on the slow pool, whatever their state.
	inPool := func() ([]client.Sandbox, error) {
		l, err := d.c.ListSandboxes(context.Background(), &client.ListSandboxesParams{Pool: ptr("slow")})
		if err != nil {
			return nil, err
		}
		return l.Items, nil
	}
	// kept checks that the state holds the one sandbox the daemon has on the pool,
	// still being provisioned, tainted or not as expected.
	kept := func(s *terraform.State) error {
		rs, ok := s.RootModule().Resources[addr]
		if !ok || rs.Primary.ID == "" {
			return fmt.Errorf("%s is not in the state after the create timed out", addr)
		}
		if rs.Primary.Tainted != tainted {
			return fmt.Errorf("%s tainted: %v, want %v", addr, rs.Primary.Tainted, tainted)
		}
		items, err := inPool()
		if err != nil {
			return err
		}
		if len(items) != 1 || items[0].Id != rs.Primary.ID {
			return fmt.Errorf("state has %s, pool has %+v", rs.Primary.ID, items)
		}
		if items[0].State != client.Queued && items[0].State != client.Provisioning {
			return fmt.Errorf("sandbox %s is %s, expected it still being provisioned", items[0].Id, items[0].State)
		}
		return nil
	}
	first := resource.TestStep{Config: cfg, Check: kept}
	next := resource.TestStep{
		// Kept: the next plan leaves the sandbox alone while it starts.
		Config:   cfg,
		PlanOnly: true,
	}
	if tainted {
		first = resource.TestStep{
			Config:      cfg,
			ExpectError: regexp.MustCompile(`(?s)did not start.*The\s+create\s+timeout\s+\(2s\)\s+passed`),
		}
		next = resource.TestStep{
			// Tainted: the next apply would replace it rather than orphan it.
			Config:             cfg,
			PlanOnly:           true,
			ExpectNonEmptyPlan: true,
			ConfigPlanChecks: resource.ConfigPlanChecks{PostApplyPreRefresh: []plancheck.PlanCheck{
				plancheck.ExpectResourceAction(addr, plancheck.ResourceActionDestroyBeforeCreate),
				plancheck.ExpectResourceAction("differently_pool.slow", plancheck.ResourceActionNoop),
			}},
		}
	}
	steps := []resource.TestStep{first}
	if tainted {
		steps = append(steps, resource.TestStep{RefreshState: true, ExpectNonEmptyPlan: true, Check: kept})
	}
	steps = append(steps, next)
	accTest(t, resource.TestCase{
		CheckDestroy: func(s *terraform.State) error {
			if err := d.sandboxesGone(s); err != nil {
				return err
			}
			items, err := inPool()
			if err != nil {
				return err
			}
			for _, sb := range items {
				if sb.State != client.Terminated && sb.State != client.Failed {
					return fmt.Errorf("sandbox %s is %s after destroy", sb.Id, sb.State)
				}
			}
			if _, err := d.c.GetPool(context.Background(), "slow"); !client.IsNotFound(err) {
				return fmt.Errorf("pool slow still exists (err %v)", err)
			}
			return nil
		},
		Steps: steps,
	})
}

// TestTimeoutOf: each operation's timeout, with its fallbacks: update falls back to
// create (which bounded updates before update existed), then the default.
func TestTimeoutOf(t *testing.T) {
	obj := func(create, update, del string) types.Object {
		v := func(s string) attr.Value {
			if s == "" {
				return types.StringNull()
			}
			return types.StringValue(s)
		}
		return types.ObjectValueMust(timeoutsTypes, map[string]attr.Value{"create": v(create), "update": v(update), "delete": v(del)})
	}
	const def = 7 * time.Minute
	for _, c := range []struct {
		obj  types.Object
		name string
		want time.Duration
	}{
		{types.ObjectNull(timeoutsTypes), "create", def},
		{types.ObjectNull(timeoutsTypes), "update", def},
		{obj("30s", "", ""), "create", 30 * time.Second},
		{obj("30s", "", ""), "update", 30 * time.Second},
		{obj("30s", "", ""), "delete", def},
		{obj("30s", "2m", "5m"), "update", 2 * time.Minute},
		{obj("30s", "2m", "5m"), "delete", 5 * time.Minute},
		{obj("", "2m", ""), "create", def},
		{obj("", "", "1h"), "update", def},
	} {
		var diags diag.Diagnostics
		if got := timeoutOf(context.Background(), c.obj, c.name, def, &diags); got != c.want || diags.HasError() {
			t.Errorf("%v %s: %v (%v), want %v", c.obj, c.name, got, diags, c.want)
		}
	}
}

// TestAccSandboxDeleteTimeout: a destroy whose delete timeout passes before the
// sandbox is terminated fails naming the timeout; the daemon goes on terminating
// it, and the next refresh removes it from the state. The sandbox is deleted while
// its create (fifteen seconds long) is still running, which the daemon can only finish
// once that create returns.
func TestAccSandboxDeleteTimeout(t *testing.T) {
	d := startDaemon(t)
	addr := "differently_sandbox.slow"
	cfg := d.config(`
resource "differently_pool" "slow" {
  name    = "slow"
  adapter = "fake"
  config  = { createLatencyMs = 15000 }
}

resource "differently_sandbox" "slow" {
  placement = { allowed_pools = [differently_pool.slow.name] }
  timeouts  = { create = "2s", delete = "2s" }
}`)
	accTest(t, resource.TestCase{
		CheckDestroy: d.sandboxesGone,
		Steps: []resource.TestStep{
			{
				// The create times out while the sandbox provisions: kept, with a warning.
				Config: cfg,
			},
			{
				Config:  cfg,
				Destroy: true,
				ExpectError: regexp.MustCompile(`(?s)was not terminated.*The\s+delete\s+timeout\s+\(2s\)\s+passed.*` +
					`goes\s+on\s+terminating`),
			},
			{
				// The failed destroy left the sandbox terminating; once the daemon has
				// terminated it, a refresh drops it from the state and the pool can go.
				PreConfig: func() {
					l, err := d.c.ListSandboxes(context.Background(), &client.ListSandboxesParams{Pool: ptr("slow")})
					if err != nil {
						t.Fatal(err)
					}
					if len(l.Items) != 1 || l.Items[0].State != client.Terminating {
						t.Fatalf("after the failed destroy the pool has %+v, want one sandbox terminating", l.Items)
					}
					ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
					defer cancel()
					if _, err := d.c.WaitForState(ctx, l.Items[0].Id, client.Terminated); err != nil {
						t.Fatal(err)
					}
				},
				RefreshState:       true,
				ExpectNonEmptyPlan: true, // the configuration asks for the sandbox again
				Check: func(s *terraform.State) error {
					if _, ok := s.RootModule().Resources[addr]; ok {
						return fmt.Errorf("%s is still in the state once terminated", addr)
					}
					return nil
				},
			},
		},
	})
}
