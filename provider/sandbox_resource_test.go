package provider

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"

	"github.com/different-ai/differently/client"
)

// sandboxesGone checks that every sandbox in the state is terminated (or unknown to
// the daemon) after destroy.
func (d *testDaemon) sandboxesGone(s *terraform.State) error {
	for _, rs := range s.RootModule().Resources {
		if rs.Type != "differently_sandbox" {
			continue
		}
		sb, err := d.c.GetSandbox(context.Background(), rs.Primary.ID)
		if client.IsNotFound(err) {
			continue
		}
		if err != nil {
			return err
		}
		if sb.State != client.Terminated && sb.State != client.Failed {
			return fmt.Errorf("sandbox %s is %s after destroy", sb.Id, sb.State)
		}
	}
	return nil
}

// sandboxID reads a sandbox's ID from the state into *id, for out-of-band changes
// in a later step.
func sandboxID(addr string, id *string) resource.TestCheckFunc {
	return func(s *terraform.State) error {
		rs, ok := s.RootModule().Resources[addr]
		if !ok {
			return fmt.Errorf("%s not in state", addr)
		}
		*id = rs.Primary.ID
		return nil
	}
}

func devhostSandbox(state, labels string, ttl int) string {
	return fmt.Sprintf(`
resource "differently_sandbox" "ci" {
  placement     = { allowed_pools = ["devhost"] }
  capabilities  = ["exec", "lifecycle.stop-start"]
  env           = { GREETING = "hello" }
  labels        = %s
  ttl_seconds   = %d
  state         = %q
  init_commands = [
    "echo \"$GREETING\" > init.txt",
    "test -s init.txt",
  ]
  timeouts = { create = "2m", delete = "2m" }
}`, labels, ttl, state)
}

func TestAccSandbox(t *testing.T) {
	d := startDaemon(t)
	addr := "differently_sandbox.ci"
	var id string
	update := resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
		plancheck.ExpectResourceAction(addr, plancheck.ResourceActionUpdate),
	}}
	accTest(t, resource.TestCase{
		CheckDestroy: d.sandboxesGone,
		Steps: []resource.TestStep{
			{
				Config: d.config(devhostSandbox("running", `{ team = "ci" }`, 3600)),
				Check: resource.ComposeAggregateTestCheckFunc(
					sandboxID(addr, &id),
					resource.TestMatchResourceAttr(addr, "id", regexp.MustCompile(`^sbx_`)),
					resource.TestCheckResourceAttr(addr, "pool", "devhost"),
					resource.TestCheckResourceAttr(addr, "status", "running"),
					resource.TestCheckResourceAttr(addr, "state", "running"),
					resource.TestCheckResourceAttrSet(addr, "backend_ref"),
					resource.TestCheckResourceAttr(addr, "project", "default"),
					// The init commands ran, in order, with the sandbox's env.
					func(*terraform.State) error {
						res, err := d.c.ExecSandbox(context.Background(), id, client.ExecRequest{Command: "cat init.txt"})
						if err != nil {
							return err
						}
						if strings.TrimSpace(res.Stdout) != "hello" {
							return fmt.Errorf("init.txt holds %q", res.Stdout)
						}
						return nil
					},
				),
			},
			{
				ResourceName:      addr,
				ImportState:       true,
				ImportStateVerify: true,
				// init_commands are read back; env is write-only on the daemon and the
				// timeouts are Terraform's alone.
				ImportStateVerifyIgnore: []string{"env", "timeouts"},
			},
			{
				// Labels and the TTL change in place.
				Config:           d.config(devhostSandbox("running", `{ team = "ci", branch = "main" }`, 7200)),
				ConfigPlanChecks: update,
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestCheckResourceAttr(addr, "labels.branch", "main"),
					resource.TestCheckResourceAttr(addr, "ttl_seconds", "7200"),
					func(s *terraform.State) error {
						if got := s.RootModule().Resources[addr].Primary.ID; got != id {
							return fmt.Errorf("sandbox replaced: %s, was %s", got, id)
						}
						return nil
					},
				),
			},
			{
				Config:           d.config(devhostSandbox("stopped", `{ team = "ci", branch = "main" }`, 7200)),
				ConfigPlanChecks: update,
				Check:            resource.TestCheckResourceAttr(addr, "status", "stopped"),
			},
			{
				Config:           d.config(devhostSandbox("running", `{ team = "ci", branch = "main" }`, 7200)),
				ConfigPlanChecks: update,
				Check:            resource.TestCheckResourceAttr(addr, "status", "running"),
			},
			{
				// Stopped out of band while the configuration says running: an in-place
				// update starts it again.
				PreConfig: func() {
					if _, err := d.c.StopSandbox(context.Background(), id); err != nil {
						t.Fatal(err)
					}
				},
				Config:           d.config(devhostSandbox("running", `{ team = "ci", branch = "main" }`, 7200)),
				ConfigPlanChecks: update,
				Check: func(*terraform.State) error {
					sb, err := d.c.GetSandbox(context.Background(), id)
					if err != nil {
						return err
					}
					if sb.State != client.Running {
						return fmt.Errorf("sandbox is %s", sb.State)
					}
					return nil
				},
			},
			{
				// The same, seen by plan alone.
				PreConfig: func() {
					if _, err := d.c.StopSandbox(context.Background(), id); err != nil {
						t.Fatal(err)
					}
				},
				Config:             d.config(devhostSandbox("running", `{ team = "ci", branch = "main" }`, 7200)),
				PlanOnly:           true,
				ExpectNonEmptyPlan: true,
			},
			{
				// Deleted out of band: removed from the state with a warning, created again.
				PreConfig: func() {
					if _, err := d.c.DeleteSandbox(context.Background(), id); err != nil {
						t.Fatal(err)
					}
				},
				Config: d.config(devhostSandbox("running", `{ team = "ci", branch = "main" }`, 7200)),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(addr, plancheck.ResourceActionCreate),
				}},
				Check: func(s *terraform.State) error {
					if got := s.RootModule().Resources[addr].Primary.ID; got == id {
						return fmt.Errorf("sandbox %s was not recreated", id)
					}
					return nil
				},
			},
		},
	})
}

func TestAccSandboxInitCommandFails(t *testing.T) {
	d := startDaemon(t)
	accTest(t, resource.TestCase{
		CheckDestroy: d.sandboxesGone,
		Steps: []resource.TestStep{{
			Config: d.config(`
resource "differently_sandbox" "bad" {
  placement     = { allowed_pools = ["devhost"] }
  env           = { TOKEN = "s3cr3t-tok-91" }
  init_commands = ["echo fine", "echo broken-setup $TOKEN >&2; exit 3"]
}`),
			// env is sensitive: a value the command printed is redacted.
			ExpectError: regexp.MustCompile(`(?s)init_commands\[1\] failed.*Exit code: 3.*broken-setup \[redacted\]`),
		}},
	})
}

// The fake pool offers pause and resume, which devhost does not.
func TestAccSandboxPaused(t *testing.T) {
	d := startDaemon(t)
	addr := "differently_sandbox.p"
	cfg := func(state string) string {
		return d.config(fmt.Sprintf(`
resource "differently_sandbox" "p" {
  placement = { allowed_pools = ["fake"] }
  resources = { cpu = 1, memory_mib = 512 }
  state     = %q
}`, state))
	}
	accTest(t, resource.TestCase{
		CheckDestroy: d.sandboxesGone,
		Steps: []resource.TestStep{
			{
				Config: cfg("paused"),
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestCheckResourceAttr(addr, "status", "paused"),
					resource.TestCheckResourceAttr(addr, "resources.cpu", "1"),
					resource.TestCheckResourceAttr(addr, "resources.disk_gib", "0"),
				),
			},
			{Config: cfg("stopped"), Check: resource.TestCheckResourceAttr(addr, "status", "stopped")},
			{Config: cfg("running"), Check: resource.TestCheckResourceAttr(addr, "status", "running")},
		},
	})
}

// A sandbox imported into a configuration that names its env and init_commands,
// which the daemon never returns, is not replaced at the first plan: the configured
// values are recorded in place, and the plan after that is empty. env_wo_version
// gets no such leeway (TestAccSandboxImportWithEnvWOReplaces).
func TestAccSandboxImportIsNotReplaced(t *testing.T) {
	d := startDaemon(t)
	addr := "differently_sandbox.imported"
	env := map[string]string{"GREETING": "hello"}
	sb, err := d.c.CreateSandboxAndWait(t.Context(), client.SandboxCreate{
		Placement:  &client.Placement{AllowedPools: &[]string{"fake"}},
		Env:        &env,
		TtlSeconds: ptr(int64(0)),
	}, "")
	if err != nil {
		t.Fatal(err)
	}
	cfg := d.importConfig(`
resource "differently_sandbox" "imported" {
  placement      = { allowed_pools = ["fake"] }
  env            = { GREETING = "hello" }
  init_commands  = ["true"]
}`)
	accTest(t, resource.TestCase{
		CheckDestroy: d.sandboxesGone,
		Steps: []resource.TestStep{
			{Config: cfg, ResourceName: addr, ImportState: true, ImportStateId: sb.Id, ImportStatePersist: true},
			{
				Config: cfg,
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(addr, plancheck.ResourceActionUpdate),
				}},
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestCheckResourceAttr(addr, "id", sb.Id),
					resource.TestCheckResourceAttr(addr, "init_commands.0", "true"),
				),
			},
			planReplaces(addr, strings.Replace(cfg, `init_commands  = ["true"]`, `init_commands  = ["true", "true"]`, 1)),
			{
				// Once recorded, a change replaces the sandbox as for any other.
				Config: strings.Replace(cfg, `GREETING = "hello"`, `GREETING = "bye"`, 1),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(addr, plancheck.ResourceActionDestroyBeforeCreate),
				}},
			},
		},
	})
}

// The mark lasts until the first update after the import: env added after that
// replaces the sandbox, as it would for one Terraform created.
func TestAccSandboxImportMarkEndsWithTheFirstUpdate(t *testing.T) {
	r := newImportRig(t)
	accTest(t, resource.TestCase{
		CheckDestroy: r.d.sandboxesGone,
		Steps: []resource.TestStep{
			r.importStep(),
			{Config: r.config(`labels = { team = "ci" }`), ConfigPlanChecks: r.expect(plancheck.ResourceActionUpdate)},
			{Config: r.config(`labels = { team = "ci" }
  env = { GREETING = "hello" }`), ConfigPlanChecks: r.expect(plancheck.ResourceActionDestroyBeforeCreate)},
		},
	})
}

// TestAccSandboxImportInitCommands: the daemon records a sandbox's init_commands, so
// an import reads every argument of a sandbox made with them back, and the plan
// after an import is empty: no update adding init_commands, no replacement.
func TestAccSandboxImportInitCommands(t *testing.T) {
	d := startDaemon(t)
	addr := "differently_sandbox.init"
	cmds := []string{"echo one > one.txt", "test -s one.txt"}
	cfg := d.importConfig(`
resource "differently_sandbox" "init" {
  placement     = { allowed_pools = ["devhost"] }
  capabilities  = ["exec"]
  labels        = { team = "ci" }
  init_commands = ["echo one > one.txt", "test -s one.txt"]
}`)
	t.Run("made by Terraform", func(t *testing.T) {
		var id string
		accTest(t, resource.TestCase{
			CheckDestroy: d.sandboxesGone,
			Steps: []resource.TestStep{
				{
					Config: cfg,
					Check: resource.ComposeAggregateTestCheckFunc(
						sandboxID(addr, &id),
						func(*terraform.State) error {
							sb, err := d.c.GetSandbox(context.Background(), id)
							if err != nil {
								return err
							}
							if got := deref(sb.InitCommands); !slices.Equal(got, cmds) {
								return fmt.Errorf("the daemon recorded init commands %q", got)
							}
							return nil
						},
					),
				},
				// Every attribute, init_commands among them, reads back as created.
				{Config: cfg, ResourceName: addr, ImportState: true, ImportStateVerify: true},
			},
		})
	})
	t.Run("imported into a new state", func(t *testing.T) {
		// Made as the provider makes it: the create records the commands.
		sb, err := d.c.CreateSandboxAndWait(t.Context(), client.SandboxCreate{
			Placement:    &client.Placement{AllowedPools: &[]string{"devhost"}},
			Capabilities: &[]string{"exec"},
			Labels:       &map[string]string{"team": "ci"},
			TtlSeconds:   ptr(int64(0)),
			InitCommands: &cmds,
		}, "")
		if err != nil {
			t.Fatal(err)
		}
		accTest(t, resource.TestCase{
			CheckDestroy: d.sandboxesGone,
			Steps: []resource.TestStep{
				{Config: cfg, ResourceName: addr, ImportState: true, ImportStateId: sb.Id, ImportStatePersist: true},
				{
					Config: cfg,
					ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
						plancheck.ExpectEmptyPlan(),
					}},
					Check: resource.ComposeAggregateTestCheckFunc(
						resource.TestCheckResourceAttr(addr, "id", sb.Id),
						resource.TestCheckResourceAttr(addr, "init_commands.#", "2"),
						resource.TestCheckResourceAttr(addr, "init_commands.1", "test -s one.txt"),
					),
				},
				{Config: cfg, PlanOnly: true},
			},
		})
	})
}
