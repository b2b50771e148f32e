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

// projectUndeclared is a CheckDestroy: after destroy the project answers, implicitly,
// with declared false.
func (d *testDaemon) projectUndeclared(org, name string) resource.TestCheckFunc {
	return func(*terraform.State) error {
		p, err := d.c.GetProject(context.Background(), org, name)
		if err != nil {
			return err
		}
		if p.Declared {
			return fmt.Errorf("project %s/%s is still declared: %+v", org, name, p)
		}
		return nil
	}
}

// projectQuota checks the daemon's quota of a project.
func (d *testDaemon) projectQuota(org, name string, sandboxes int, cpu float64, memoryMiB, diskGiB int64) resource.TestCheckFunc {
	return func(*terraform.State) error {
		p, err := d.c.GetProject(context.Background(), org, name)
		if err != nil {
			return err
		}
		q := p.Quota
		if !p.Declared || deref(q.Sandboxes) != sandboxes || deref(q.Cpu) != cpu ||
			deref(q.MemoryMiB) != memoryMiB || deref(q.DiskGiB) != diskGiB {
			return fmt.Errorf("daemon has project %+v with quota sandboxes=%d cpu=%g memory=%d disk=%d", p,
				deref(q.Sandboxes), deref(q.Cpu), deref(q.MemoryMiB), deref(q.DiskGiB))
		}
		return nil
	}
}

func TestAccProject(t *testing.T) {
	d := startDaemon(t)
	addr := "differently_project.ci"
	update := resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
		plancheck.ExpectResourceAction(addr, plancheck.ResourceActionUpdate),
	}}
	const v1 = `
resource "differently_project" "ci" {
  name  = "ci"
  quota = { sandboxes = 3, cpu = 4.5 }
}`
	const v2 = `
resource "differently_project" "ci" {
  name  = "ci"
  quota = { sandboxes = 2, memory_mib = 2048, disk_gib = 10 }
}`
	// A sandbox in the project: usage changes under the project resource, which
	// must not show as a difference.
	const withSandbox = v2 + `

resource "differently_sandbox" "s" {
  org       = differently_project.ci.org
  project   = differently_project.ci.name
  placement = { allowed_pools = ["fake"] }
  resources = { cpu = 1, memory_mib = 512, disk_gib = 1 }
}`
	putQuota := func() {
		_, err := d.c.PutProject(context.Background(), "default", "ci", client.ProjectSpec{
			Quota: &client.ProjectQuota{Sandboxes: ptr(9), Cpu: ptr(1.0)},
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	accTest(t, resource.TestCase{
		CheckDestroy: func(s *terraform.State) error {
			if err := d.sandboxesGone(s); err != nil {
				return err
			}
			return d.projectUndeclared("default", "ci")(s)
		},
		Steps: []resource.TestStep{
			{
				Config: d.config(v1),
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestCheckResourceAttr(addr, "id", "default/ci"),
					resource.TestCheckResourceAttr(addr, "org", "default"),
					resource.TestCheckResourceAttr(addr, "quota.sandboxes", "3"),
					resource.TestCheckResourceAttr(addr, "quota.cpu", "4.5"),
					resource.TestCheckResourceAttr(addr, "quota.memory_mib", "0"),
					resource.TestCheckResourceAttr(addr, "quota.disk_gib", "0"),
					resource.TestCheckResourceAttr(addr, "usage.sandboxes", "0"),
					resource.TestCheckResourceAttr(addr, "usage.cpu", "0"),
					resource.TestCheckResourceAttr(addr, "cost", "0"),
					d.projectQuota("default", "ci", 3, 4.5, 0, 0),
				),
			},
			{ResourceName: addr, ImportState: true, ImportStateId: "default/ci", ImportStateVerify: true},
			// A bare name imports from the default org.
			{ResourceName: addr, ImportState: true, ImportStateId: "ci", ImportStateVerify: true},
			{
				Config:           d.config(v2),
				ConfigPlanChecks: update,
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestCheckResourceAttr(addr, "quota.sandboxes", "2"),
					resource.TestCheckResourceAttr(addr, "quota.cpu", "0"),
					resource.TestCheckResourceAttr(addr, "quota.memory_mib", "2048"),
					d.projectQuota("default", "ci", 2, 0, 2048, 10),
				),
			},
			{
				// The quota changed through the admin API: the plan alone shows it.
				PreConfig:          putQuota,
				Config:             d.config(v2),
				PlanOnly:           true,
				ExpectNonEmptyPlan: true,
			},
			{
				// And apply restores the configuration.
				PreConfig:        putQuota,
				Config:           d.config(v2),
				ConfigPlanChecks: update,
				Check:            d.projectQuota("default", "ci", 2, 0, 2048, 10),
			},
			{
				// Usage moves as sandboxes come and go; the plan after this apply
				// (which refreshes a project whose usage grew) must still be empty.
				Config: d.config(withSandbox),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(addr, plancheck.ResourceActionNoop),
					plancheck.ExpectResourceAction("differently_sandbox.s", plancheck.ResourceActionCreate),
				}},
			},
			{
				RefreshState: true,
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestCheckResourceAttr(addr, "usage.sandboxes", "1"),
					resource.TestCheckResourceAttr(addr, "usage.cpu", "1"),
					resource.TestCheckResourceAttr(addr, "usage.memory_mib", "512"),
					resource.TestCheckResourceAttr(addr, "usage.disk_gib", "1"),
				),
			},
			{
				// The sandbox goes; the project is untouched, and its usage drops.
				Config: d.config(v2),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(addr, plancheck.ResourceActionNoop),
				}},
			},
			{
				RefreshState: true,
				Check:        resource.TestCheckResourceAttr(addr, "usage.sandboxes", "0"),
			},
			{
				// The declaration removed out of band: dropped from the state with a
				// warning and declared again.
				PreConfig: func() {
					if err := d.c.DeleteProject(context.Background(), "default", "ci"); err != nil {
						t.Fatal(err)
					}
				},
				Config: d.config(v2),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(addr, plancheck.ResourceActionCreate),
				}},
				Check: d.projectQuota("default", "ci", 2, 0, 2048, 10),
			},
			{
				// A new org replaces the declaration.
				Config: d.config(`
resource "differently_project" "ci" {
  org  = "acme"
  name = "ci"
}`),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(addr, plancheck.ResourceActionDestroyBeforeCreate),
				}},
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestCheckResourceAttr(addr, "id", "acme/ci"),
					resource.TestCheckResourceAttr(addr, "quota.sandboxes", "0"),
					d.projectQuota("acme", "ci", 0, 0, 0, 0),
					d.projectUndeclared("default", "ci"),
				),
			},
		},
	})
}

// TestAccProjectQuota: a quota of one sandbox refuses a second sandbox resource, and
// a project with a sandbox Terraform does not manage cannot be destroyed.
func TestAccProjectQuota(t *testing.T) {
	d := startDaemon(t)
	const project = `
resource "differently_project" "q" {
  name  = "quota"
  quota = { sandboxes = 1 }
}`
	sandbox := func(name, extra string) string {
		return fmt.Sprintf(`
resource "differently_sandbox" %q {
  project   = differently_project.q.name
  placement = { allowed_pools = ["fake"] }
  %s
}`, name, extra)
	}
	var outOfBand string
	accTest(t, resource.TestCase{
		CheckDestroy: func(s *terraform.State) error {
			if err := d.sandboxesGone(s); err != nil {
				return err
			}
			return d.projectUndeclared("default", "quota")(s)
		},
		Steps: []resource.TestStep{
			{
				// b waits for a, so which one is refused is certain.
				Config:      d.config(project + sandbox("a", "") + sandbox("b", "depends_on = [differently_sandbox.a]")),
				ExpectError: regexp.MustCompile(`(?s)quota_exceeded:\s+project\s+default/quota\s+would\s+use\s+2\s+of\s+1\s+sandboxes`),
			},
			{
				// a was made, b was not: nothing else to do.
				Config: d.config(project + sandbox("a", "")),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectEmptyPlan(),
				}},
				Check: resource.TestCheckResourceAttr("differently_project.q", "usage.sandboxes", "1"),
			},
			{
				// Only the project remains; then a sandbox appears outside Terraform.
				Config: d.config(project),
			},
			{
				PreConfig: func() {
					sb, err := d.c.CreateSandbox(context.Background(), client.SandboxCreate{
						Project: ptr("quota"), Placement: &client.Placement{AllowedPools: &[]string{"fake"}},
					}, "out-of-band")
					if err != nil {
						t.Fatal(err)
					}
					outOfBand = sb.Id
				},
				Config:      d.config(project),
				Destroy:     true,
				ExpectError: regexp.MustCompile(`(?s)Project default/quota still has sandboxes.*not\s+terminated`),
			},
			{
				// Once that sandbox is gone, the project can go too (CheckDestroy).
				PreConfig: func() {
					ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
					defer cancel()
					if _, err := d.c.DeleteSandbox(ctx, outOfBand); err != nil {
						t.Fatal(err)
					}
					if _, err := d.c.WaitForState(ctx, outOfBand, client.Terminated); err != nil {
						t.Fatal(err)
					}
				},
				Config: d.config(project),
			},
		},
	})
}
