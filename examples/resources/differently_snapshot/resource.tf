resource "differently_sandbox" "golden" {
  placement     = { allowed_pools = ["devhost"] }
  init_commands = ["echo 'dependencies installed' > setup.log"]
}

# A disk snapshot of the prepared sandbox...
resource "differently_snapshot" "golden" {
  sandbox_id = differently_sandbox.golden.id
  kind       = "disk"
}

# ...from which new sandboxes start with the same files.
resource "differently_sandbox" "worker" {
  from_snapshot = differently_snapshot.golden.id
}
