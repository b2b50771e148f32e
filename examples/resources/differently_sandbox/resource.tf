# A long-lived CI sandbox. Create waits until it runs, then runs init_commands once,
# in order; set state = "stopped" to stop it in place between jobs.
resource "differently_sandbox" "ci" {
  capabilities = ["exec", "files", "lifecycle.stop-start"]
  resources    = { cpu = 2, memory_mib = 4096 }
  placement    = { allowed_pools = ["devhost"] }

  labels      = { team = "infra", purpose = "ci" }
  ttl_seconds = 86400
  env         = { CI = "true" }

  init_commands = [
    "mkdir -p workspace",
    "echo ready > workspace/status",
  ]

  state    = "running"
  timeouts = { create = "15m", delete = "5m" }
}

output "ci_sandbox_pool" {
  value = differently_sandbox.ci.pool
}
