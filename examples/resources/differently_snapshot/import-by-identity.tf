# Terraform 1.12 or later: an import block may name the snapshot by its identity.
import {
  to = differently_snapshot.golden
  identity = {
    id = "snap_01JD6Y4W3ZP2Q8Y5V0T7X9K3MN"
  }
}
