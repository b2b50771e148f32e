package provider

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"

	"github.com/different-ai/differently/client"
)

// woSandbox is a devhost sandbox with a plain env and an env_wo that comes from an
// ephemeral variable, set through TF_VAR_wo_secret: so no file of the test's
// working directories holds the secret unless Terraform or the provider put it there.
func woSandbox(version int) string {
	return fmt.Sprintf(`
variable "wo_secret" {
  type      = string
  ephemeral = true
  sensitive = true
}

resource "differently_sandbox" "wo" {
  placement      = { allowed_pools = ["devhost"] }
  env            = { PLAIN = "visible" }
  env_wo         = { SECRET = var.wo_secret }
  env_wo_version = %d
  init_commands  = ["test \"$PLAIN\" = visible", "test -n \"$SECRET\""]
  timeouts       = { create = "2m", delete = "2m" }
}`, version)
}

func TestAccSandboxWriteOnlyEnv(t *testing.T) {
	d := startDaemon(t)
	const first, second = "wo-s3cr3t-first-7f41c2", "wo-s3cr3t-second-93be08"
	// Every working directory of the test (states, their backups, saved plans) is
	// made under work, which the checks search.
	work := t.TempDir()
	t.Setenv("TF_ACC_TEMP_DIR", work)
	t.Setenv("TF_VAR_wo_secret", first)
	addr := "differently_sandbox.wo"
	var id string
	// hasEnv checks, through the API, that the sandbox runs with the variables.
	hasEnv := func(want map[string]string) resource.TestCheckFunc {
		return func(*terraform.State) error {
			for name, value := range want {
				res, err := d.c.ExecSandbox(context.Background(), id, client.ExecRequest{Command: `printf %s "$` + name + `"`})
				if err != nil {
					return err
				}
				if res.Stdout != value {
					return fmt.Errorf("%s is %q in sandbox %s, want %q", name, res.Stdout, id, value)
				}
			}
			return nil
		}
	}
	notStored := func(secrets ...string) resource.TestCheckFunc {
		return func(*terraform.State) error {
			// env's value is in the state and in the saved plan: a search that
			// misses it there proves nothing.
			found, err := filesHolding(work, "visible")
			if err != nil {
				return err
			}
			if !slices.Contains(found, "terraform.tfstate") || !slices.Contains(found, "tfplan") {
				return fmt.Errorf("the search finds env's value only in %v", found)
			}
			for _, s := range secrets {
				if found, err := filesHolding(work, s); err != nil || len(found) > 0 {
					return fmt.Errorf("a write-only value is in %v (%v)", found, err)
				}
			}
			return nil
		}
	}
	accTest(t, resource.TestCase{
		CheckDestroy: d.sandboxesGone,
		Steps: []resource.TestStep{
			{
				Config: d.config(woSandbox(1)),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					planOmits{first},
				}},
				Check: resource.ComposeAggregateTestCheckFunc(
					sandboxID(addr, &id),
					hasEnv(map[string]string{"PLAIN": "visible", "SECRET": first}),
					resource.TestCheckNoResourceAttr(addr, "env_wo"),
					resource.TestCheckNoResourceAttr(addr, "env_wo.%"),
					resource.TestCheckResourceAttr(addr, "env_wo_version", "1"),
					resource.TestCheckResourceAttr(addr, "env.PLAIN", "visible"),
					notStored(first),
				),
			},
			{
				// A new value alone is not seen: only the create reads env_wo.
				PreConfig: func() { t.Setenv("TF_VAR_wo_secret", second) },
				Config:    d.config(woSandbox(1)),
				PlanOnly:  true,
			},
			{
				// A new version replaces the sandbox, which gets the new value.
				Config: d.config(woSandbox(2)),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(addr, plancheck.ResourceActionDestroyBeforeCreate),
					planOmits{first, second},
				}},
				Check: resource.ComposeAggregateTestCheckFunc(
					func(s *terraform.State) error {
						old := id
						if id = s.RootModule().Resources[addr].Primary.ID; id == old {
							return fmt.Errorf("sandbox %s was not replaced", id)
						}
						return nil
					},
					hasEnv(map[string]string{"PLAIN": "visible", "SECRET": second}),
					resource.TestCheckResourceAttr(addr, "env_wo_version", "2"),
					notStored(first, second),
				),
			},
		},
	})
}

func TestAccSandboxWriteOnlyEnvNameInBoth(t *testing.T) {
	d := startDaemon(t)
	accTest(t, resource.TestCase{
		Steps: []resource.TestStep{{
			Config: d.config(`
resource "differently_sandbox" "both" {
  placement = { allowed_pools = ["fake"] }
  env       = { TOKEN = "plain-value", OTHER = "x" }
  env_wo    = { TOKEN = "secret-value" }
}`),
			ExpectError: regexp.MustCompile(`Environment variable TOKEN is set twice`),
		}},
	})
}

// An init command that prints an env_wo value shows it redacted, as it would an
// env value.
func TestAccSandboxWriteOnlyEnvRedacted(t *testing.T) {
	d := startDaemon(t)
	t.Setenv("TF_VAR_wo_secret", "s3cr3t-wo-tok-55")
	accTest(t, resource.TestCase{
		CheckDestroy: d.sandboxesGone,
		Steps: []resource.TestStep{{
			Config: d.config(`
variable "wo_secret" {
  type      = string
  ephemeral = true
  sensitive = true
}

resource "differently_sandbox" "bad" {
  placement     = { allowed_pools = ["devhost"] }
  env_wo        = { TOKEN = var.wo_secret }
  init_commands = ["echo broken-setup $TOKEN >&2; exit 3"]
}`),
			ExpectError: regexp.MustCompile(`(?s)init_commands\[0\] failed.*Exit code: 3.*broken-setup \[redacted\]`),
		}},
	})
}

// planOmits fails a plan whose JSON form holds one of the secrets.
type planOmits []string

func (p planOmits) CheckPlan(_ context.Context, req plancheck.CheckPlanRequest, resp *plancheck.CheckPlanResponse) {
	b, err := json.Marshal(req.Plan)
	if err != nil {
		resp.Error = err
		return
	}
	for _, s := range p {
		if bytes.Contains(b, []byte(s)) {
			resp.Error = fmt.Errorf("the plan holds a write-only value")
			return
		}
	}
}

// filesHolding lists the files under dir that hold s: as it is, in the private
// state of a state file's resources (which the framework writes as base64 of a JSON
// object of base64 values), or in an entry of a zip archive (a saved plan).
func filesHolding(dir, s string) ([]string, error) {
	var found []string
	err := filepath.WalkDir(dir, func(path string, e fs.DirEntry, err error) error {
		if err != nil || !e.Type().IsRegular() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		texts, err := fileTexts(b)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		for _, text := range texts {
			if strings.Contains(text, s) {
				found = append(found, filepath.Base(path))
				break
			}
		}
		return nil
	})
	return found, err
}

// fileTexts is a file's content and whatever it encodes that filesHolding searches.
func fileTexts(b []byte) ([]string, error) {
	texts := []string{string(b)}
	var state struct {
		Resources []struct {
			Instances []struct {
				Private string `json:"private"`
			} `json:"instances"`
		} `json:"resources"`
	}
	if json.Unmarshal(b, &state) == nil {
		for _, r := range state.Resources {
			for _, i := range r.Instances {
				if i.Private == "" {
					continue
				}
				private, err := base64.StdEncoding.DecodeString(i.Private)
				if err != nil {
					return nil, fmt.Errorf("private state: %w", err)
				}
				texts = append(texts, string(private))
				var keys map[string]string
				if err := json.Unmarshal(private, &keys); err != nil {
					return nil, fmt.Errorf("private state: %w", err)
				}
				for _, v := range keys {
					value, err := base64.StdEncoding.DecodeString(v)
					if err != nil {
						return nil, fmt.Errorf("private state: %w", err)
					}
					texts = append(texts, string(value))
				}
			}
		}
	}
	if z, err := zip.NewReader(bytes.NewReader(b), int64(len(b))); err == nil {
		for _, f := range z.File {
			r, err := f.Open()
			if err != nil {
				return nil, err
			}
			entry, err := io.ReadAll(r)
			r.Close()
			if err != nil {
				return nil, err
			}
			texts = append(texts, string(entry))
		}
	}
	return texts, nil
}

// Short env values are settings, left readable; longer ones, and every env_wo
// value, are hidden.
func TestEnvRedactor(t *testing.T) {
	r := envRedactor(map[string]string{"CI": "true", "RETRIES": "3", "TOKEN": "s3cr3t-tok", "PIN": "42"},
		map[string]string{"PIN": "42"})
	got := r.String("CI=true, gave up after 3 attempts, token s3cr3t-tok, pin 42")
	if want := "CI=true, gave up after 3 attempts, token [redacted], pin [redacted]"; got != want {
		t.Errorf("redacted %q, want %q", got, want)
	}
}
