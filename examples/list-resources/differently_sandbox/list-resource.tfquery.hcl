# Every running sandbox of the data team on the gpu pool, with the whole resource, so
# that `terraform query -generate-config-out=generated.tf` writes configuration
# and an import block for each.
list "differently_sandbox" "data_team" {
  provider         = differently
  include_resource = true

  config {
    pool   = "gpu"
    labels = { team = "data" }
    states = ["running"]
  }
}
