# The deployment-wide placement policy. Destroying this resource resets it to the
# defaults: no external placement.
resource "differently_policy" "this" {
  allow_external = true
  external_pools = ["daytona-eu"]
}
