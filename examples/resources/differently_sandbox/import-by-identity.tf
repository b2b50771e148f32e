# Terraform 1.12 or later: an import block may name the sandbox by its identity,
# as the blocks `terraform query -generate-config-out` writes do.
import {
  to = differently_sandbox.ci
  identity = {
    id = "sbx_01JD6Y4W3ZP2Q8Y5V0T7X9K3MN"
  }
}
