package provider

import (
	"strconv"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
)

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
