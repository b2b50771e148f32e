# Terraform 1.12 or later: an import block may name the project by its identity.
import {
  to = differently_project.ci
  identity = {
    org  = "default"
    name = "ci"
  }
}
