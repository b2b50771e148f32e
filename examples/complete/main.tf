# A complete setup: the pools an infrastructure team declares, the placement policy,
# the CI project with its quota, a profile for CI runners, a token for the CI system,
# and a long-lived CI sandbox with its golden snapshot.
#
# It runs against `differently-server --dev`, whose devhost and fake pools are
# development-only adapters; in production the pools would be opensandbox, daytona,
# freestyle or remote. Configure the provider with DIFFERENTLY_ENDPOINT and
# DIFFERENTLY_TOKEN (the dev server writes an admin token to <data dir>/admin-token).

terraform {
  required_providers {
    differently = {
      source = "different-ai/differently"
    }
  }
}

provider "differently" {}

# A private pool for CI work, with prices for cost estimates.
resource "differently_pool" "ci" {
  name            = "ci"
  adapter         = "fake"
  region          = "eu-west"
  max_concurrency = 50
  max_starting    = 5

  cost_model = { cpu_hour = 0.04, memory_gib_hour = 0.005 }

  config = {
    totalCPU       = 128
    totalMemoryMiB = 262144
    templates      = ["ubuntu-24.04"]
  }
}

# A third-party pool. It receives no work unless the policy allows it by name.
resource "differently_pool" "burst" {
  name    = "burst"
  adapter = "fake"
  trust   = "external"
  region  = "us-east"

  config = { regions = ["us-east"] }
}

resource "differently_policy" "this" {
  allow_external = true
  external_pools = [differently_pool.burst.name]
}

# The ci project, with a quota on what its live sandboxes request together.
resource "differently_project" "ci" {
  name  = "ci"
  quota = { sandboxes = 20, cpu = 64, memory_mib = 131072 }
}

# What every CI runner gets unless it says otherwise.
resource "differently_profile" "ci_runner" {
  name         = "ci-runner"
  template     = "ubuntu-24.04"
  capabilities = ["exec", "files", "lifecycle.stop-start"]
  placement    = { allowed_pools = [differently_pool.ci.name], regions = ["eu-west"] }
  ttl_seconds  = 7 * 24 * 3600
}

# The CI system's credential, scoped to the ci project.
resource "differently_project_token" "ci" {
  project = differently_project.ci.name
  name    = "ci-runners"
}

# A long-lived runner, prepared once by init_commands. The profile supplies the
# template, placement, TTL and the usual capabilities; the runner adds snapshots.
resource "differently_sandbox" "runner" {
  project      = differently_project.ci.name
  profile      = differently_profile.ci_runner.name
  capabilities = ["snapshots.disk"]
  resources    = { cpu = 4, memory_mib = 8192, disk_gib = 20 }

  labels = { team = "infra", role = "ci-runner" }
  env    = { CI = "true" }

  init_commands = [
    "mkdir -p /tmp/ci",
    "echo prepared > /tmp/ci/status",
  ]

  timeouts = { create = "20m" }

  # Placement needs the policy first when the sandbox may land on an external pool.
  depends_on = [differently_policy.this]
}

resource "differently_snapshot" "runner" {
  sandbox_id = differently_sandbox.runner.id
}

data "differently_trust_report" "current" {
  depends_on = [differently_policy.this]
}

output "runner" {
  value = {
    id   = differently_sandbox.runner.id
    pool = differently_sandbox.runner.pool
  }
}

output "ci_token" {
  value     = differently_project_token.ci.secret
  sensitive = true
}

output "pools_receiving_work" {
  value = [for p in data.differently_trust_report.current.pools : p.name if p.receives_work]
}
