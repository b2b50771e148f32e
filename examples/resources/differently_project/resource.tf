# Declares the "ci" project with a quota. Sandboxes of the project that are not
# terminated or failed may request at most this much together; a create that would go
# over is refused with quota_exceeded. A limit left out (or 0) is unlimited. The
# computed usage and cost are read at each refresh; their changes are never a
# difference in the plan.
resource "differently_project" "ci" {
  org  = "default"
  name = "ci"

  quota = {
    sandboxes  = 20
    cpu        = 64
    memory_mib = 131072
  }
}

# Referencing the project makes Terraform create sandboxes after the declaration and
# destroy them before it (the daemon keeps a declaration while the project has live
# sandboxes). The quota limits cpu and memory, so the sandbox must say how much of
# each it wants: the pool's default size could not be counted.
resource "differently_sandbox" "runner" {
  org       = differently_project.ci.org
  project   = differently_project.ci.name
  placement = { allowed_pools = ["devhost"] }
  resources = { cpu = 1, memory_mib = 1024 }
}
