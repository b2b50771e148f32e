# Every declared project of the organization acme.
list "differently_project" "acme" {
  provider         = differently
  include_resource = true

  config {
    org = "acme"
  }
}
