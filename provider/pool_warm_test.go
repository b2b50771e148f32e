package provider

import (
	"context"
	"fmt"
	"regexp"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"

	"github.com/different-ai/differently/client"
)

func warmPool(warm string) string {
	return fmt.Sprintf(`
resource "differently_pool" "warm" {
  name    = "acc-warm"
  adapter = "fake"
  config  = { templates = ["ubuntu", "alpine"] }
  %s
}

data "differently_pool" "warm" {
  name = differently_pool.warm.name
}`, warm)
}

// wantWarm checks the daemon's shapes of the pool: each shape's template and size.
func (d *testDaemon) wantWarm(want ...any) resource.TestCheckFunc {
	return func(*terraform.State) error {
		p, err := d.c.GetPool(context.Background(), "acc-warm")
		if err != nil {
			return err
		}
		var got []any
		for _, w := range deref(p.Warm) {
			got = append(got, deref(w.Template), w.Size)
		}
		if fmt.Sprint(got...) != fmt.Sprint(want...) {
			return fmt.Errorf("the daemon's warm shapes are %v, want %v", got, want)
		}
		return nil
	}
}

// warmPoolGone checks that the acc-warm pool was destroyed.
func (d *testDaemon) warmPoolGone(*terraform.State) error {
	if _, err := d.c.GetPool(context.Background(), "acc-warm"); !client.IsNotFound(err) {
		return fmt.Errorf("pool acc-warm still exists (err %v)", err)
	}
	return nil
}

// claimWarm creates a sandbox the acc-warm pool's shape (ubuntu, 1 CPU, 512 MiB)
// matches once the pool has ready ones, checks that it was served warm, waits,
// pass by pass of the scheduler, until the daemon has counted the hit, and deletes
// the sandbox.
func (d *testDaemon) claimWarm(t *testing.T) {
	t.Helper()
	ctx := t.Context()
	deadline := time.After(30 * time.Second)
	// until waits for the pool's only shape to satisfy ok.
	until := func(what string, ok func(client.WarmStatus) bool) {
		t.Helper()
		for {
			p, err := d.c.GetPool(ctx, "acc-warm")
			if err != nil {
				t.Fatal(err)
			}
			if st := deref(p.WarmStatus); len(st) == 1 && ok(st[0]) {
				return
			}
			select {
			case <-d.passes:
			case <-deadline:
				t.Fatalf("pool acc-warm: warm status %+v after 30 s, want %s", deref(p.WarmStatus), what)
			}
		}
	}
	until("a ready sandbox", func(s client.WarmStatus) bool { return s.Ready > 0 })
	sb, err := d.c.CreateSandboxAndWait(ctx, client.SandboxCreate{Template: ptr("ubuntu"),
		Resources: &client.Resources{CPU: 1, MemoryMiB: 512}}, "")
	if err != nil {
		t.Fatal(err)
	}
	if sb.Labels["differently.dev/warm"] != "true" {
		t.Fatalf("a create the shape matches was not served warm: %+v", sb)
	}
	until("a hit", func(s client.WarmStatus) bool { return s.Hits > 0 })
	if _, err := d.c.DeleteSandboxAndWait(ctx, sb.Id); err != nil {
		t.Fatal(err)
	}
}

// TestAccPoolWarm: a pool's warm shapes are created, resized, put back after a change
// through the admin API, removed, and emptied before the pool is destroyed.
func TestAccPoolWarm(t *testing.T) {
	d := startDaemon(t)
	addr := "differently_pool.warm"
	update := resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
		plancheck.ExpectResourceAction(addr, plancheck.ResourceActionUpdate),
	}}
	shape := func(size int) string {
		return fmt.Sprintf(`warm = [{
    template        = "ubuntu"
    resources       = { cpu = 1, memory_mib = 512 }
    size            = %d
    max_age_seconds = 3600
  }]`, size)
	}
	accTest(t, resource.TestCase{
		CheckDestroy: d.warmPoolGone,
		Steps: []resource.TestStep{
			{
				Config: d.config(warmPool(shape(2))),
				Check: resource.ComposeAggregateTestCheckFunc(
					d.wantWarm("ubuntu", 2),
					resource.TestCheckResourceAttr(addr, "warm.#", "1"),
					resource.TestCheckResourceAttr(addr, "warm.0.size", "2"),
					resource.TestCheckResourceAttr(addr, "warm.0.resources.memory_mib", "512"),
					// Left out, and 0 on the daemon: still left out.
					resource.TestCheckNoResourceAttr(addr, "warm.0.resources.disk_gib"),
					resource.TestCheckNoResourceAttr(addr, "warm.0.profile"),
					resource.TestCheckResourceAttr(addr, "warm_status.#", "1"),
					resource.TestCheckResourceAttr(addr, "warm_status.0.target", "2"),
					resource.TestCheckResourceAttr(addr, "warm_status.0.template", "ubuntu"),
					resource.TestCheckResourceAttr(addr, "warm_status.0.hits", "0"),
					resource.TestCheckResourceAttr(addr, "warm_status.0.misses", "0"),
					resource.TestCheckNoResourceAttr(addr, "warm_status.0.claim_p50_ms"),
					resource.TestCheckResourceAttr("data.differently_pool.warm", "warm.0.size", "2"),
					resource.TestCheckResourceAttr("data.differently_pool.warm", "warm.0.max_age_seconds", "3600"),
				),
			},
			{Config: d.config(warmPool(shape(2))), PlanOnly: true},
			{
				// A create the shape matches, served warm: a refresh records the hit and
				// its claim time, and plans no change.
				PreConfig:    func() { d.claimWarm(t) },
				RefreshState: true,
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestCheckResourceAttr(addr, "warm_status.0.hits", "1"),
					resource.TestCheckResourceAttr(addr, "warm_status.0.misses", "0"),
					resource.TestCheckResourceAttrSet(addr, "warm_status.0.claim_p50_ms"),
					resource.TestCheckResourceAttrSet(addr, "warm_status.0.claim_p99_ms"),
					resource.TestCheckResourceAttr("data.differently_pool.warm", "warm_status.0.hits", "1"),
				),
			},
			{
				Config:           d.config(warmPool(shape(3))),
				ConfigPlanChecks: update,
				Check: resource.ComposeAggregateTestCheckFunc(
					d.wantWarm("ubuntu", 3),
					resource.TestCheckResourceAttr(addr, "warm.0.size", "3"),
					resource.TestCheckResourceAttr(addr, "warm_status.0.target", "3"),
				),
			},
			{
				// Resized and given a second shape through the admin API: the plan puts
				// the configured list back.
				PreConfig: func() {
					_, err := d.c.PatchPool(context.Background(), "acc-warm", client.PoolPatch{Warm: &[]client.WarmShape{
						{Template: ptr("ubuntu"), Resources: &client.Resources{CPU: 1, MemoryMiB: 512}, Size: 1, MaxAgeSeconds: ptr(int64(3600))},
						{Template: ptr("alpine"), Size: 1},
					}})
					if err != nil {
						t.Fatal(err)
					}
				},
				Config:           d.config(warmPool(shape(3))),
				ConfigPlanChecks: update,
				Check:            d.wantWarm("ubuntu", 3),
			},
			{
				Config:           d.config(warmPool("")),
				ConfigPlanChecks: update,
				Check: resource.ComposeAggregateTestCheckFunc(
					d.wantWarm(),
					resource.TestCheckNoResourceAttr(addr, "warm.#"),
					resource.TestCheckResourceAttr(addr, "warm_status.#", "0"),
				),
			},
			{Config: d.config(warmPool("")), PlanOnly: true},
			{
				// Destroyed with a shape: its sandboxes are emptied first.
				Config: d.config(warmPool(shape(1))),
				Check:  d.wantWarm("ubuntu", 1),
			},
			{ResourceName: addr, ImportState: true, ImportStateVerify: true, ImportStateVerifyIgnore: []string{"warm_status"}},
		},
	})
}

// Destroyed while its warm sandboxes are starting, one slot at a time and the rest
// queued for no pool yet: the destroy waits for the daemon to end them all, asking
// again while it answers that they are terminating, and then deletes the pool.
func TestAccPoolWarmDestroyWhileStarting(t *testing.T) {
	d := startDaemon(t)
	cfg := d.config(`
resource "differently_pool" "warm" {
  name         = "acc-warm"
  adapter      = "fake"
  max_starting = 1
  config       = { templates = ["ubuntu"], createLatencyMs = 1000 }
  warm         = [{ template = "ubuntu", size = 3 }]
}`)
	accTest(t, resource.TestCase{
		CheckDestroy: d.warmPoolGone,
		Steps: []resource.TestStep{
			{Config: cfg},
			{
				// The destroy comes once the filler has asked for the three: one
				// starting on the pool's only start slot, two queued.
				PreConfig: func() {
					deadline := time.After(30 * time.Second)
					for {
						p, err := d.c.GetPool(t.Context(), "acc-warm")
						if err != nil {
							t.Fatal(err)
						}
						if st := deref(p.WarmStatus); len(st) == 1 && st[0].Starting == 3 {
							return
						}
						select {
						case <-d.passes:
						case <-deadline:
							t.Fatalf("pool acc-warm: warm status %+v after 30 s, want 3 starting", deref(p.WarmStatus))
						}
					}
				},
				Config:   cfg,
				PlanOnly: true,
			},
		},
	})
}

// Shapes the daemon would refuse fail the plan.
func TestAccPoolWarmValidation(t *testing.T) {
	d := startDaemon(t)
	for _, tc := range []struct{ name, warm, want string }{
		{"size above the bound", `warm = [{ size = 1001 }]`, `between 0 and 1000`},
		{"negative size", `warm = [{ size = -1 }]`, `between 0 and 1000`},
		{"max age too short", `warm = [{ size = 1, max_age_seconds = 30 }]`, `max_age_seconds`},
		{"bad profile name", `warm = [{ size = 1, profile = "Not A Name" }]`, `must be 1 to 63 lowercase`},
		{"the same shape twice", `warm = [{ template = "ubuntu", size = 1 }, { template = "ubuntu", size = 2 }]`, `Repeated warm shape`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			accTest(t, resource.TestCase{Steps: []resource.TestStep{{
				Config:      d.config(warmPool(tc.warm)),
				PlanOnly:    true,
				ExpectError: regexp.MustCompile(tc.want),
			}}})
		})
	}
}
