data "differently_trust_report" "current" {}

# Fail the plan if an external pool would receive work.
check "no_external_work" {
  assert {
    condition = alltrue([
      for p in data.differently_trust_report.current.pools : p.receives_work == false if p.trust == "external"
    ])
    error_message = "An external pool receives work under the current policy."
  }
}
