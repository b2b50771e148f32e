# The snapshots of every sandbox of the project acme/ci, terminated ones included.
list "differently_snapshot" "ci" {
  provider = differently

  config {
    project = "acme/ci"
  }
}
