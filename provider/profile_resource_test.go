package provider

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"

	"github.com/different-ai/differently/client"
)

func profileConfig(profile string) string {
	return profile + `

resource "differently_sandbox" "s" {
  profile      = differently_profile.x.name
  capabilities = ["exec"]
  timeouts     = { create = "2m", delete = "2m" }
}`
}

const profileV1 = `
resource "differently_profile" "x" {
  name         = "ci-runner"
  capabilities = ["exec", "files", "lifecycle.stop-start"]
  resources    = { cpu = 1 }
  placement    = { allowed_pools = ["devhost"] }
  ttl_seconds  = 3600
}`

const profileV2 = `
resource "differently_profile" "x" {
  name         = "ci-runner"
  capabilities = ["exec", "lifecycle.stop-start"]
  resources    = { cpu = 1, memory_mib = 1024 }
  template     = "ubuntu"
  placement    = { allowed_pools = ["devhost"], regions = [] }
  ttl_seconds  = 7200
}`

func TestAccProfile(t *testing.T) {
	d := startDaemon(t)
	addr := "differently_profile.x"
	const name = "ci-runner"
	var sbID string
	profileOnly := resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
		plancheck.ExpectResourceAction(addr, plancheck.ResourceActionUpdate),
		plancheck.ExpectResourceAction("differently_sandbox.s", plancheck.ResourceActionNoop),
	}}
	profileIs := func(caps []string, ttl int64, template string) resource.TestCheckFunc {
		return func(*terraform.State) error {
			p, err := d.c.GetProfile(context.Background(), name)
			if err != nil {
				return err
			}
			if !slices.Equal(p.Capabilities, caps) || p.TtlSeconds != ttl || deref(p.Template) != template {
				return fmt.Errorf("daemon has profile %+v", p)
			}
			return nil
		}
	}
	accTest(t, resource.TestCase{
		CheckDestroy: func(s *terraform.State) error {
			if _, err := d.c.GetProfile(context.Background(), name); !client.IsNotFound(err) {
				return fmt.Errorf("profile %s still exists (err %v)", name, err)
			}
			return d.sandboxesGone(s)
		},
		Steps: []resource.TestStep{
			{
				Config: d.config(profileConfig(profileV1)),
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestCheckResourceAttr(addr, "id", name),
					resource.TestCheckResourceAttr(addr, "capabilities.#", "3"),
					resource.TestCheckResourceAttr(addr, "resources.cpu", "1"),
					resource.TestCheckResourceAttr(addr, "resources.memory_mib", "0"),
					resource.TestCheckResourceAttr(addr, "placement.allowed_pools.0", "devhost"),
					resource.TestCheckNoResourceAttr(addr, "placement.regions"),
					resource.TestCheckNoResourceAttr(addr, "template"),
					resource.TestCheckResourceAttr(addr, "ttl_seconds", "3600"),
					profileIs([]string{"exec", "files", "lifecycle.stop-start"}, 3600, ""),
					// The sandbox got the profile's settings (seen through the API) while
					// its own state keeps the configuration, so the next plan is empty.
					sandboxID("differently_sandbox.s", &sbID),
					resource.TestCheckResourceAttr("differently_sandbox.s", "profile", name),
					resource.TestCheckResourceAttr("differently_sandbox.s", "pool", "devhost"),
					resource.TestCheckResourceAttr("differently_sandbox.s", "capabilities.#", "1"),
					resource.TestCheckNoResourceAttr("differently_sandbox.s", "ttl_seconds"),
					resource.TestCheckNoResourceAttr("differently_sandbox.s", "placement"),
					resource.TestCheckResourceAttr("differently_sandbox.s", "resources.cpu", "1"),
					func(*terraform.State) error {
						sb, err := d.c.GetSandbox(context.Background(), sbID)
						if err != nil {
							return err
						}
						if deref(sb.Profile) != name || deref(sb.Pool) != "devhost" || deref(sb.TtlSeconds) != 3600 ||
							sb.Resources.CPU != 1 || !slices.Equal(sb.Capabilities, []string{"exec", "files", "lifecycle.stop-start"}) {
							return fmt.Errorf("sandbox did not pick up the profile: %+v", sb)
						}
						return nil
					},
				),
			},
			{ResourceName: addr, ImportState: true, ImportStateId: name, ImportStateVerify: true},
			{
				// An update changes the profile in place and leaves the sandbox alone.
				Config:           d.config(profileConfig(profileV2)),
				ConfigPlanChecks: profileOnly,
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestCheckResourceAttr(addr, "capabilities.#", "2"),
					resource.TestCheckResourceAttr(addr, "template", "ubuntu"),
					resource.TestCheckResourceAttr(addr, "placement.regions.#", "0"),
					resource.TestCheckResourceAttr(addr, "resources.memory_mib", "1024"),
					profileIs([]string{"exec", "lifecycle.stop-start"}, 7200, "ubuntu"),
					// Profile changes never reach existing sandboxes.
					func(*terraform.State) error {
						sb, err := d.c.GetSandbox(context.Background(), sbID)
						if err != nil {
							return err
						}
						if deref(sb.TtlSeconds) != 3600 || len(sb.Capabilities) != 3 {
							return fmt.Errorf("the profile change reached the sandbox: %+v", sb)
						}
						return nil
					},
				),
			},
			{
				// Changed through the admin API: the plan shows it...
				PreConfig: func() {
					if _, err := d.c.PutProfile(context.Background(), name, client.ProfileSpec{
						Capabilities: &[]string{"exec"}, TtlSeconds: ptr(int64(5)),
					}); err != nil {
						t.Fatal(err)
					}
				},
				Config:             d.config(profileConfig(profileV2)),
				PlanOnly:           true,
				ExpectNonEmptyPlan: true,
			},
			{
				// ...and apply restores it.
				Config:           d.config(profileConfig(profileV2)),
				ConfigPlanChecks: profileOnly,
				Check:            profileIs([]string{"exec", "lifecycle.stop-start"}, 7200, "ubuntu"),
			},
			{
				// Deleted out of band: removed from the state with a warning and
				// created again; the sandbox made from it stays.
				PreConfig: func() {
					if err := d.c.DeleteProfile(context.Background(), name); err != nil {
						t.Fatal(err)
					}
				},
				Config: d.config(profileConfig(profileV2)),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(addr, plancheck.ResourceActionCreate),
					plancheck.ExpectResourceAction("differently_sandbox.s", plancheck.ResourceActionNoop),
				}},
				Check: profileIs([]string{"exec", "lifecycle.stop-start"}, 7200, "ubuntu"),
			},
			{
				// A profile with nothing but a name: every attribute back to empty.
				Config: d.config(`
resource "differently_profile" "x" {
  name = "ci-runner"
}`),
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestCheckNoResourceAttr(addr, "capabilities"),
					resource.TestCheckNoResourceAttr(addr, "placement"),
					resource.TestCheckResourceAttr(addr, "ttl_seconds", "0"),
					resource.TestCheckResourceAttr(addr, "resources.cpu", "0"),
					profileIs([]string{}, 0, ""),
				),
			},
		},
	})
}

// A sandbox whose configuration sets its template or a placement list empty takes
// the profile's, as if they were left out, and its state keeps them empty: the
// apply is consistent with the plan and the next plan is empty.
func TestAccProfileFillsEmptyValues(t *testing.T) {
	d := startDaemon(t)
	if _, err := d.c.PutProfile(t.Context(), "filler", client.ProfileSpec{
		Template:  ptr("base"),
		Placement: &client.Placement{AllowedPools: &[]string{"fake"}, Regions: &[]string{"local"}},
	}); err != nil {
		t.Fatal(err)
	}
	addr := "differently_sandbox.s"
	var id string
	accTest(t, resource.TestCase{
		CheckDestroy: d.sandboxesGone,
		Steps: []resource.TestStep{{
			Config: d.config(`
resource "differently_sandbox" "s" {
  profile   = "filler"
  template  = ""
  placement = { allowed_pools = [], regions = [] }
}`),
			Check: resource.ComposeAggregateTestCheckFunc(
				sandboxID(addr, &id),
				resource.TestCheckResourceAttr(addr, "template", ""),
				resource.TestCheckResourceAttr(addr, "placement.allowed_pools.#", "0"),
				resource.TestCheckResourceAttr(addr, "placement.regions.#", "0"),
				func(*terraform.State) error {
					sb, err := d.c.GetSandbox(context.Background(), id)
					if err != nil {
						return err
					}
					if deref(sb.Template) != "base" || deref(sb.Pool) != "fake" {
						return fmt.Errorf("sandbox did not take the profile's template and pool: %+v", sb)
					}
					return nil
				},
			),
		}},
	})
}

// A resources value set to 0 with a profile is filled in by the profile, field by
// field, and stays 0 in the state instead of an inconsistent result after apply.
func TestAccProfileFillsZeroResources(t *testing.T) {
	d := startDaemon(t)
	if _, err := d.c.PutProfile(t.Context(), "big", client.ProfileSpec{
		Resources: &client.Resources{CPU: 2, MemoryMiB: 2048},
		Placement: &client.Placement{AllowedPools: &[]string{"fake"}},
	}); err != nil {
		t.Fatal(err)
	}
	addr := "differently_sandbox.s"
	var id string
	accTest(t, resource.TestCase{
		CheckDestroy: d.sandboxesGone,
		Steps: []resource.TestStep{{
			Config: d.config(`
resource "differently_sandbox" "s" {
  profile   = "big"
  resources = { cpu = 0, memory_mib = 512 }
}`),
			Check: resource.ComposeAggregateTestCheckFunc(
				sandboxID(addr, &id),
				resource.TestCheckResourceAttr(addr, "resources.cpu", "0"),
				resource.TestCheckResourceAttr(addr, "resources.memory_mib", "512"),
				func(*terraform.State) error {
					sb, err := d.c.GetSandbox(context.Background(), id)
					if err != nil {
						return err
					}
					if sb.Resources.CPU != 2 || sb.Resources.MemoryMiB != 512 {
						return fmt.Errorf("sandbox resources %+v, want the profile's CPU and the configured memory", sb.Resources)
					}
					return nil
				},
			),
		}},
	})
}
