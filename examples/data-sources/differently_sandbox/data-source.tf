resource "differently_sandbox" "ci" {
  placement = { allowed_pools = ["fake"] }
}

# Reads a sandbox as the daemon sees it now, whatever its state.
data "differently_sandbox" "ci" {
  id = differently_sandbox.ci.id
}

output "ci_state" {
  value = data.differently_sandbox.ci.state
}
