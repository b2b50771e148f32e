package provider

import (
	"context"
	"fmt"
	"reflect"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"

	"github.com/different-ai/differently/client"
)

// TestAccSandboxImportFromProfile imports a sandbox the daemon made from a profile
// into configurations that name capabilities, a template and placement. The daemon
// merged them with the profile's, so what the import reads is the merged sandbox; a
// configuration that, merged the same way, gives that sandbox is recorded in place
// and then plans nothing, while one that asks for something the sandbox is not
// still replaces it.
func TestAccSandboxImportFromProfile(t *testing.T) {
	d := startDaemon(t)
	putImportProfile(t, d)
	addr := "differently_sandbox.imported"
	cfg := func(body string) string { return importProfileConfig(d, body) }
	const (
		replaced = plancheck.ResourceActionDestroyBeforeCreate
		recorded = plancheck.ResourceActionUpdate
		same     = plancheck.ResourceActionNoop
	)
	for _, tc := range []struct {
		name string
		body string
		want plancheck.ResourceActionType
		// then, when set, is planned once the first plan is applied: the import's
		// leeway is over, and it replaces the sandbox.
		then string
	}{
		{"the configuration merged with the profile is the sandbox", `capabilities = ["exec"]
  template     = "ubuntu"
  placement    = { allowed_pools = ["fake"] }`, recorded, `capabilities = ["exec", "files"]
  template     = "ubuntu"
  placement    = { allowed_pools = ["fake"] }`},
		// Whatever the profile was when the sandbox was made filled these in, as far
		// as the provider can tell: the profile's template now (base) is not what the
		// sandbox has, and need not be, since profile changes never reach sandboxes.
		{"what the profile fills in left out", ``, same, ""},
		{"empty values, which the profile fills in", `capabilities = []
  template     = ""
  placement    = { allowed_pools = [], regions = [] }`, recorded, ""},
		{"every merged value named", `capabilities = ["exec", "files"]
  template     = "ubuntu"
  placement    = { allowed_pools = ["fake"], regions = ["local"] }`, recorded, ""},
		{"another template", `capabilities = ["exec"]
  template     = "debian"
  placement    = { allowed_pools = ["fake"] }`, replaced, ""},
		{"the profile's template, which the sandbox overrode", `template = "base"`, replaced, ""},
		{"a capability the sandbox lacks", `capabilities = ["exec", "lifecycle.pause-resume"]
  template     = "ubuntu"
  placement    = { allowed_pools = ["fake"] }`, replaced, ""},
		{"another pool", `capabilities = ["exec"]
  template     = "ubuntu"
  placement    = { allowed_pools = ["devhost"] }`, replaced, ""},
		{"another region", `capabilities = ["exec"]
  template     = "ubuntu"
  placement    = { allowed_pools = ["fake"], regions = ["elsewhere"] }`, replaced, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sb := newProfileSandbox(t, d)
			config := cfg(tc.body)
			steps := []resource.TestStep{
				{Config: config, ResourceName: addr, ImportState: true, ImportStateId: sb.Id, ImportStatePersist: true},
			}
			if tc.want == replaced {
				steps = append(steps, planReplaces(addr, config))
			} else {
				steps = append(steps,
					resource.TestStep{
						Config: config,
						ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
							plancheck.ExpectResourceAction(addr, tc.want),
						}},
						Check: resource.TestCheckResourceAttr(addr, "id", sb.Id),
					},
					resource.TestStep{Config: config, PlanOnly: true},
				)
			}
			if tc.then != "" {
				steps = append(steps, planReplaces(addr, cfg(tc.then)))
			}
			accTest(t, resource.TestCase{CheckDestroy: d.sandboxesGone, Steps: steps})
		})
	}
}

// An import block plans the import and the first plan together, with the same
// outcome as terraform import followed by a plan.
func TestAccSandboxImportBlockFromProfile(t *testing.T) {
	d := startDaemon(t)
	putImportProfile(t, d)
	addr := "differently_sandbox.imported"
	for _, tc := range []struct {
		name string
		body string
		want plancheck.ResourceActionType
	}{
		{"the configuration merged with the profile is the sandbox", `capabilities = ["exec"]
  template     = "ubuntu"
  placement    = { allowed_pools = ["fake"] }`, plancheck.ResourceActionUpdate},
		{"another template", `capabilities = ["exec"]
  template     = "debian"
  placement    = { allowed_pools = ["fake"] }`, plancheck.ResourceActionDestroyBeforeCreate},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sb := newProfileSandbox(t, d)
			accTest(t, resource.TestCase{
				CheckDestroy: d.sandboxesGone,
				Steps: []resource.TestStep{{
					Config:             importProfileConfig(d, tc.body),
					ResourceName:       addr,
					ImportState:        true,
					ImportStateKind:    resource.ImportBlockWithID,
					ImportStateId:      sb.Id,
					ExpectNonEmptyPlan: true,
					ImportPlanChecks: resource.ImportPlanChecks{PreApply: []plancheck.PlanCheck{
						plancheck.ExpectResourceAction(addr, tc.want),
					}},
				}},
			})
		})
	}
}

const importProfile = "imported"

// putImportProfile makes the profile the sandboxes of the import tests are made
// from: it adds files, and brings a template, a pool and a region.
func putImportProfile(t *testing.T, d *testDaemon) {
	t.Helper()
	if _, err := d.c.PutProfile(t.Context(), importProfile, client.ProfileSpec{
		Capabilities: &[]string{"files"},
		Template:     ptr("base"),
		Placement:    &client.Placement{AllowedPools: &[]string{"devhost"}, Regions: &[]string{"local"}},
		TtlSeconds:   ptr(int64(0)),
	}); err != nil {
		t.Fatal(err)
	}
}

// newProfileSandbox makes, outside Terraform, a sandbox from the import profile
// that names exec, its own template and the fake pool: the profile adds files and
// the region, and its template and pool are overridden.
func newProfileSandbox(t *testing.T, d *testDaemon) *client.Sandbox {
	t.Helper()
	sb, err := d.c.CreateSandboxAndWait(t.Context(), client.SandboxCreate{
		Profile:      ptr(importProfile),
		Capabilities: &[]string{"exec"},
		Template:     ptr("ubuntu"),
		Placement:    &client.Placement{AllowedPools: &[]string{"fake"}},
	}, "")
	if err != nil {
		t.Fatal(err)
	}
	return sb
}

// importProfileConfig is a sandbox from the import profile with body's arguments.
func importProfileConfig(d *testDaemon, body string) string {
	return d.importConfig(`
resource "differently_sandbox" "imported" {
  profile = "` + importProfile + `"
  ` + body + `
}`)
}

// planReplaces is a plan-only step that expects config to replace addr: the
// replacement is the answer, it need not run.
func planReplaces(addr, config string) resource.TestStep {
	return resource.TestStep{
		Config:             config,
		PlanOnly:           true,
		ExpectNonEmptyPlan: true,
		ConfigPlanChecks: resource.ConfigPlanChecks{PostApplyPostRefresh: []plancheck.PlanCheck{
			plancheck.ExpectResourceAction(addr, plancheck.ResourceActionDestroyBeforeCreate),
		}},
	}
}

func TestImportedSandboxFits(t *testing.T) {
	s := importedSandbox{Template: "ubuntu", Capabilities: []string{"exec", "files"}, AllowedPools: []string{"fake"}, Regions: []string{"local", "eu"}}
	strs := func(v ...string) []attr.Value {
		out := make([]attr.Value, len(v))
		for i, x := range v {
			out[i] = types.StringValue(x)
		}
		return out
	}
	list := func(v ...string) types.List { return types.ListValueMust(types.StringType, strs(v...)) }
	set := func(v ...string) types.Set { return types.SetValueMust(types.StringType, strs(v...)) }
	placement := func(pools, regions types.List) types.Object {
		return types.ObjectValueMust(placementTypes, map[string]attr.Value{"allowed_pools": pools, "regions": regions})
	}
	null := types.ListNull(types.StringType)
	for _, tc := range []struct {
		name string
		fits bool
		got  bool
	}{
		{"template left out", true, s.templateFits(types.StringNull())},
		{"template empty", true, s.templateFits(types.StringValue(""))},
		{"the sandbox's template", true, s.templateFits(types.StringValue("ubuntu"))},
		{"another template", false, s.templateFits(types.StringValue("debian"))},
		{"unknown template", false, s.templateFits(types.StringUnknown())},
		{"capabilities left out", true, s.capabilitiesFit(types.SetNull(types.StringType))},
		{"some of the sandbox's capabilities", true, s.capabilitiesFit(set("files"))},
		{"all of them", true, s.capabilitiesFit(set("exec", "files"))},
		{"one the sandbox lacks", false, s.capabilitiesFit(set("exec", "lifecycle.stop-start"))},
		{"unknown capabilities", false, s.capabilitiesFit(types.SetUnknown(types.StringType))},
		{"an unknown capability", false, s.capabilitiesFit(types.SetValueMust(types.StringType, []attr.Value{types.StringUnknown()}))},
		{"placement left out", true, s.placementFits(types.ObjectNull(placementTypes))},
		{"the sandbox's pools", true, s.placementFits(placement(list("fake"), null))},
		{"the sandbox's pools and regions", true, s.placementFits(placement(list("fake"), list("local", "eu")))},
		{"empty lists", true, s.placementFits(placement(list(), list()))},
		{"another pool", false, s.placementFits(placement(list("devhost"), null))},
		{"the regions in another order", false, s.placementFits(placement(null, list("eu", "local")))},
		{"unknown placement", false, s.placementFits(types.ObjectUnknown(placementTypes))},
		{"unknown regions", false, s.placementFits(placement(list("fake"), types.ListUnknown(types.StringType)))},
	} {
		if tc.got != tc.fits {
			t.Errorf("%s: fits is %v, want %v", tc.name, tc.got, tc.fits)
		}
	}
}

// A mark written by ImportState, or by a provider from before the mark held a
// record, is no record: the plan replaces as it did.
func TestImportedProfileSandboxReadsOnlyRecords(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		mark string
		want *importedSandbox
	}{
		{"", nil},
		{"true", nil},
		{`{"reads":0}`, nil},
		{`{"reads":1,"sandbox":{"template":"ubuntu","capabilities":["exec"]}}`, &importedSandbox{Template: "ubuntu", Capabilities: []string{"exec"}}},
	} {
		var diags diag.Diagnostics
		got := importedProfileSandbox(ctx, markOnly(tc.mark), &diags)
		if diags.HasError() || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("mark %q: got %+v (%v), want %+v", tc.mark, got, diags, tc.want)
		}
	}
}

// markOnly is a private state holding one import mark.
type markOnly string

func (m markOnly) GetKey(_ context.Context, key string) ([]byte, diag.Diagnostics) {
	if key != importedKey || m == "" {
		return nil, nil
	}
	return []byte(m), nil
}

// After an import, a configured TTL the sandbox already has is recorded without a
// PATCH, which would restart the sandbox's lifetime from the time of the update.
func TestAccSandboxImportKeepsTheExpiry(t *testing.T) {
	d := startDaemon(t)
	const profile = "day"
	if _, err := d.c.PutProfile(t.Context(), profile, client.ProfileSpec{
		Placement: &client.Placement{AllowedPools: &[]string{"fake"}}, TtlSeconds: ptr(int64(86400)),
	}); err != nil {
		t.Fatal(err)
	}
	sb, err := d.c.CreateSandboxAndWait(t.Context(), client.SandboxCreate{Profile: ptr(profile)}, "")
	if err != nil {
		t.Fatal(err)
	}
	if sb.ExpiresAt == nil {
		t.Fatalf("sandbox %s has no expiry: %+v", sb.Id, sb)
	}
	addr := "differently_sandbox.imported"
	cfg := d.importConfig(`
resource "differently_sandbox" "imported" {
  profile     = "` + profile + `"
  ttl_seconds = 86400
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
					resource.TestCheckResourceAttr(addr, "ttl_seconds", "86400"),
					func(*terraform.State) error {
						now, err := d.c.GetSandbox(context.Background(), sb.Id)
						if err != nil {
							return err
						}
						if now.ExpiresAt == nil || !now.ExpiresAt.Equal(*sb.ExpiresAt) {
							return fmt.Errorf("the expiry moved from %v to %v", sb.ExpiresAt, now.ExpiresAt)
						}
						return nil
					},
				),
			},
			{Config: cfg, PlanOnly: true},
		},
	})
}

// privateMap is a private state in memory.
type privateMap map[string][]byte

func (p privateMap) GetKey(_ context.Context, key string) ([]byte, diag.Diagnostics) {
	return p[key], nil
}

func (p privateMap) SetKey(_ context.Context, key string, value []byte) diag.Diagnostics {
	if len(value) == 0 {
		delete(p, key)
	} else {
		p[key] = value
	}
	return nil
}

// The mark outlives the import's read and one refresh, then ends on its own: a
// first plan with nothing to apply must not leave it for a change made much later.
func TestImportMarkEndsAfterTwoReads(t *testing.T) {
	ctx := context.Background()
	for _, profile := range []string{"", "ci"} {
		p := privateMap{importedKey: []byte(`{"reads":0}`)}
		sb := &client.Sandbox{Profile: &profile, Template: ptr("ubuntu")}
		for read := 1; read <= 3; read++ {
			var diags diag.Diagnostics
			advanceImport(ctx, sb, p, &diags)
			_, marked := readImportMark(ctx, p, &diags)
			if diags.HasError() || marked != (read <= importReadsAllowed) {
				t.Fatalf("profile %q, read %d: marked %v (%v)", profile, read, marked, diags)
			}
			if got := importedProfileSandbox(ctx, p, &diags); marked && (got != nil) != (profile != "") {
				t.Fatalf("profile %q, read %d: record %+v", profile, read, got)
			}
		}
	}
}

// An import whose first plan has nothing to apply does not leave the import's
// leeway behind: env added later replaces the sandbox instead of being recorded in
// place and never reaching it.
func TestAccSandboxImportLeewayEnds(t *testing.T) {
	r := newImportRig(t)
	accTest(t, resource.TestCase{
		CheckDestroy: r.d.sandboxesGone,
		Steps: []resource.TestStep{
			r.importStep(),
			{Config: r.config(""), ConfigPlanChecks: r.expect(plancheck.ResourceActionNoop)},
			{Config: r.config("env = { TOKEN = \"new\" }"), ConfigPlanChecks: r.expect(plancheck.ResourceActionDestroyBeforeCreate)},
		},
	})
}

// importRig is a sandbox on the fake pool made outside Terraform, to be imported as
// differently_sandbox.imported.
type importRig struct {
	d    *testDaemon
	addr string
	id   string
}

func newImportRig(t *testing.T) importRig {
	t.Helper()
	d := startDaemon(t)
	sb, err := d.c.CreateSandboxAndWait(t.Context(), client.SandboxCreate{
		Placement:  &client.Placement{AllowedPools: &[]string{"fake"}},
		TtlSeconds: ptr(int64(0)),
	}, "")
	if err != nil {
		t.Fatal(err)
	}
	return importRig{d: d, addr: "differently_sandbox.imported", id: sb.Id}
}

// config is the resource on the fake pool with extra arguments.
func (r importRig) config(extra string) string {
	return r.configWith("", extra)
}

// configWith is config with more HCL (an import block, say) before the resource.
func (r importRig) configWith(before, extra string) string {
	return r.d.importConfig(before + `
resource "differently_sandbox" "imported" {
  placement = { allowed_pools = ["fake"] }
  ` + extra + `
}`)
}

// importStep imports the sandbox with the import command.
func (r importRig) importStep() resource.TestStep {
	return resource.TestStep{Config: r.config(""), ResourceName: r.addr, ImportState: true, ImportStateId: r.id, ImportStatePersist: true}
}

func (r importRig) expect(a plancheck.ResourceActionType) resource.ConfigPlanChecks {
	return resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction(r.addr, a)}}
}

// env_wo_version gets no import leeway: an imported sandbox whose configuration sets
// it is replaced at the first plan, with an import block as with the import command,
// so that the env_wo secrets surely reach a sandbox.
func TestAccSandboxImportWithEnvWOReplaces(t *testing.T) {
	r := newImportRig(t)
	accTest(t, resource.TestCase{
		CheckDestroy: r.d.sandboxesGone,
		Steps: []resource.TestStep{{
			Config: r.configWith(`
import {
  to = differently_sandbox.imported
  id = "`+r.id+`"
}
`, "env_wo         = { TOKEN = \"wo-token\" }\n  env_wo_version = 1"),
			ConfigPlanChecks: r.expect(plancheck.ResourceActionDestroyBeforeCreate),
		}},
	})
}

// A mark from a provider version whose leeway lasted until the first update ends at
// the next read.
func TestLegacyImportMarkEndsAtTheNextRead(t *testing.T) {
	ctx := context.Background()
	p := privateMap{importedKey: []byte("true")}
	var diags diag.Diagnostics
	if _, marked := readImportMark(ctx, p, &diags); !marked {
		t.Fatal("the legacy mark is not read as a mark")
	}
	advanceImport(ctx, &client.Sandbox{}, p, &diags)
	if _, marked := readImportMark(ctx, p, &diags); marked || diags.HasError() {
		t.Fatalf("the legacy mark outlived a read (%v)", diags)
	}
}
