# Terraform 1.12 or later: an import block may name the pool by its identity.
import {
  to = differently_pool.ci
  identity = {
    name = "ci-fake"
  }
}
