# A token for the "ci" project, handed to the CI system. The secret lives in the
# Terraform state only; protect the state accordingly.
resource "differently_project_token" "ci" {
  org     = "default"
  project = "ci"
  name    = "github-actions"
}

output "ci_token" {
  value     = differently_project_token.ci.secret
  sensitive = true
}
