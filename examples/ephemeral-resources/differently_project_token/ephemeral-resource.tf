# A CI job acts for its project with a token minted for this run only: issued with an
# expiry, revoked when the run ends, and kept in neither the plan nor the state.
ephemeral "differently_project_token" "ci" {
  project     = "ci"
  name        = "ci-run"
  ttl_seconds = 1800
}

# The provider acting as the project; the default provider, with the admin token,
# minted the token.
provider "differently" {
  alias = "ci"
  token = ephemeral.differently_project_token.ci.secret
}

resource "differently_sandbox" "job" {
  provider  = differently.ci
  placement = { allowed_pools = ["fake"] }
}
