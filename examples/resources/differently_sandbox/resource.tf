# A secret for the runner's environment. Ephemeral and passed through env_wo, it
# is kept out of the plan and the state (Terraform 1.11 or later). Set it with
# TF_VAR_registry_token; the empty default lets the example run as it is.
variable "registry_token" {
  type      = string
  ephemeral = true
  sensitive = true
  default   = ""
}

# A long-lived CI sandbox. Create waits until it runs, then runs init_commands once,
# in order; set state = "stopped" to stop it in place between jobs.
resource "differently_sandbox" "ci" {
  capabilities = ["exec", "files", "lifecycle.stop-start"]
  resources    = { cpu = 2, memory_mib = 4096 }
  placement    = { allowed_pools = ["devhost"] }

  labels      = { team = "infra", purpose = "ci" }
  ttl_seconds = 86400
  env         = { CI = "true" }

  # Read only when the sandbox is created: bump the version to replace the sandbox
  # with a new token.
  env_wo         = { REGISTRY_TOKEN = var.registry_token }
  env_wo_version = 1

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
