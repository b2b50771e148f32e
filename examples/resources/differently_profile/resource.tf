# A profile for CI runners: what a sandbox gets when it names the profile and leaves
# the setting out. Capabilities are added to the sandbox's own.
resource "differently_profile" "ci_runner" {
  name         = "ci-runner"
  capabilities = ["exec", "files", "lifecycle.stop-start"]
  resources    = { cpu = 2, memory_mib = 4096 }
  placement    = { allowed_pools = ["devhost"] }
  ttl_seconds  = 86400
}

# The sandbox gets the profile's capabilities, resources, placement and TTL. What the
# profile contributes is not a difference on later plans, and later changes to the
# profile apply to new sandboxes only.
resource "differently_sandbox" "runner" {
  profile = differently_profile.ci_runner.name
  labels  = { team = "infra" }
}
