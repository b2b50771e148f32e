# The pools of the opensandbox adapter created through the API (pools of the
# daemon's config file are left out: Terraform cannot manage them).
list "differently_pool" "opensandbox" {
  provider         = differently
  include_resource = true

  config {
    adapter = "opensandbox"
  }
}
