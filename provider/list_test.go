package provider

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/querycheck"
	"github.com/hashicorp/terraform-plugin-testing/querycheck/queryfilter"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	"github.com/hashicorp/terraform-plugin-testing/tfversion"

	"github.com/different-ai/differently/client"
)

// outsideTerraform is what TestAccListResources and TestQueryGeneratesImports find:
// objects made through the API, as a team does before it adopts Terraform.
type outsideTerraform struct {
	data, web *client.Sandbox
	snapshot  *client.Snapshot
}

func makeOutsideTerraform(t *testing.T, d *testDaemon) outsideTerraform {
	t.Helper()
	ctx := t.Context()
	if _, err := d.c.CreatePool(ctx, client.PoolSpec{Name: "extra", Adapter: "fake", MaxConcurrency: ptr(5)}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.c.PutProject(ctx, "acme", "web", client.ProjectSpec{Quota: &client.ProjectQuota{Sandboxes: ptr(7)}}); err != nil {
		t.Fatal(err)
	}
	create := func(team string) *client.Sandbox {
		sb, err := d.c.CreateSandboxAndWait(ctx, client.SandboxCreate{
			Template:  ptr("ubuntu"),
			Labels:    &map[string]string{"team": team},
			Placement: &client.Placement{AllowedPools: &[]string{"fake"}},
		}, "")
		if err != nil {
			t.Fatal(err)
		}
		return sb
	}
	o := outsideTerraform{data: create("data"), web: create("web")}
	snap, err := d.c.CreateSnapshot(ctx, o.data.Id, "")
	if err != nil {
		t.Fatal(err)
	}
	o.snapshot = snap
	return o
}

// TestAccListResources: terraform query finds sandboxes by label and pool, the
// pools Terraform could manage, declared projects and a sandbox's snapshots, with
// the identities import blocks need and, when asked, the whole resource.
func TestAccListResources(t *testing.T) {
	d := startDaemon(t)
	o := makeOutsideTerraform(t, d)
	id := func(v string) map[string]knownvalue.Check {
		return map[string]knownvalue.Check{"id": knownvalue.StringExact(v)}
	}
	accTest(t, resource.TestCase{
		TerraformVersionChecks: []tfversion.TerraformVersionCheck{tfversion.SkipBelow(tfversion.Version1_14_0)},
		Steps: []resource.TestStep{
			{Config: d.importConfig("")},
			{
				Query: true,
				Config: `
list "differently_sandbox" "data" {
  provider = differently
  config {
    labels = { team = "data" }
  }
}

list "differently_sandbox" "on_fake" {
  provider         = differently
  include_resource = true
  config {
    pool   = "fake"
    states = ["running"]
  }
}

list "differently_sandbox" "stopped" {
  provider = differently
  config {
    states = ["stopped"]
  }
}

list "differently_pool" "fake" {
  provider = differently
  config {
    adapter = "fake"
  }
}

list "differently_project" "acme" {
  provider = differently
  config {
    org = "acme"
  }
}

list "differently_snapshot" "of_data" {
  provider = differently
  config {
    sandbox_id = "` + o.data.Id + `"
  }
}

list "differently_snapshot" "everywhere" {
  provider = differently
}

list "differently_snapshot" "of_default" {
  provider = differently
  config {
    project = "default/default"
  }
}

list "differently_snapshot" "of_acme" {
  provider = differently
  config {
    project = "acme/default"
  }
}
`,
				QueryResultChecks: []querycheck.QueryResultCheck{
					querycheck.ExpectLength("differently_sandbox.data", 1),
					querycheck.ExpectIdentity("differently_sandbox.data", id(o.data.Id)),
					querycheck.ExpectLength("differently_sandbox.on_fake", 2),
					querycheck.ExpectIdentity("differently_sandbox.on_fake", id(o.web.Id)),
					querycheck.ExpectResourceKnownValues("differently_sandbox.on_fake", queryfilter.ByResourceIdentity(id(o.web.Id)),
						[]querycheck.KnownValueCheck{
							{Path: tfjsonpath.New("labels").AtMapKey("team"), KnownValue: knownvalue.StringExact("web")},
							{Path: tfjsonpath.New("template"), KnownValue: knownvalue.StringExact("ubuntu")},
							{Path: tfjsonpath.New("pool"), KnownValue: knownvalue.StringExact("fake")},
							{Path: tfjsonpath.New("state"), KnownValue: knownvalue.StringExact("running")},
						}),
					querycheck.ExpectResourceDisplayName("differently_sandbox.on_fake", queryfilter.ByResourceIdentity(id(o.data.Id)),
						knownvalue.StringRegexp(regexp.MustCompile(`^`+o.data.Id+` \(ubuntu on fake, running, project default/default\)$`))),
					querycheck.ExpectLength("differently_sandbox.stopped", 0),
					// The development daemon's fake pool and the one made above.
					querycheck.ExpectLength("differently_pool.fake", 2),
					querycheck.ExpectIdentity("differently_pool.fake", map[string]knownvalue.Check{"name": knownvalue.StringExact("extra")}),
					querycheck.ExpectLength("differently_project.acme", 1),
					querycheck.ExpectIdentity("differently_project.acme", map[string]knownvalue.Check{
						"org": knownvalue.StringExact("acme"), "name": knownvalue.StringExact("web"),
					}),
					querycheck.ExpectLength("differently_snapshot.of_data", 1),
					querycheck.ExpectIdentity("differently_snapshot.of_data", id(o.snapshot.Id)),
					querycheck.ExpectLength("differently_snapshot.everywhere", 1),
					querycheck.ExpectLength("differently_snapshot.of_default", 1),
					querycheck.ExpectIdentity("differently_snapshot.of_default", id(o.snapshot.Id)),
					querycheck.ExpectLength("differently_snapshot.of_acme", 0),
				},
			},
		},
	})
}

// TestAccListSandboxesStopsAtLimit: a list block's limit bounds what the query
// returns.
func TestAccListSandboxesStopsAtLimit(t *testing.T) {
	d := startDaemon(t)
	for range 3 {
		if _, err := d.c.CreateSandbox(context.Background(), client.SandboxCreate{Placement: &client.Placement{AllowedPools: &[]string{"fake"}}}, ""); err != nil {
			t.Fatal(err)
		}
	}
	accTest(t, resource.TestCase{
		TerraformVersionChecks: []tfversion.TerraformVersionCheck{tfversion.SkipBelow(tfversion.Version1_14_0)},
		Steps: []resource.TestStep{
			{Config: d.importConfig("")},
			{
				Query: true,
				Config: `
list "differently_sandbox" "two" {
  provider = differently
  limit    = 2
}
`,
				QueryResultChecks: []querycheck.QueryResultCheck{querycheck.ExpectLength("differently_sandbox.two", 2)},
			},
		},
	})
}

// TestAccListExamples runs each list resource's example query (the docs show them)
// against a development daemon.
func TestAccListExamples(t *testing.T) {
	files, err := filepath.Glob("../examples/list-resources/*/list-resource.tfquery.hcl")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 4 {
		t.Fatalf("found %d list examples, want 4: %v", len(files), files)
	}
	for _, file := range files {
		name, _ := filepath.Rel("../examples", file)
		t.Run(name, func(t *testing.T) {
			src, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			d := startDaemon(t)
			t.Setenv(EnvEndpoint, d.url)
			t.Setenv(EnvToken, d.token)
			accTest(t, resource.TestCase{
				TerraformVersionChecks: []tfversion.TerraformVersionCheck{tfversion.SkipBelow(tfversion.Version1_14_0)},
				Steps: []resource.TestStep{
					{Config: `provider "differently" {}`},
					{Query: true, Config: string(src)},
				},
			})
		})
	}
}
