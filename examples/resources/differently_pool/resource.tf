# A pool on the development-only fake adapter. The config keys are the adapter's own
# and may nest: lists and objects are written as in any HCL value.
resource "differently_pool" "ci" {
  name            = "ci-fake"
  adapter         = "fake"
  trust           = "private"
  region          = "eu-west"
  max_concurrency = 20
  max_starting    = 4

  cost_model = {
    cpu_hour        = 0.04
    memory_gib_hour = 0.005
  }

  config = {
    totalCPU       = 64
    totalMemoryMiB = 131072
    templates      = ["ubuntu-24.04", "alpine"]
    createErrors   = []
  }

  features = ["exec", "exec.stream", "files", "lifecycle.stop-start"]

  # Two sandboxes of this shape kept running for creates that ask for exactly it;
  # each is replaced after an hour of waiting.
  warm = [{
    template        = "ubuntu-24.04"
    resources       = { cpu = 1, memory_mib = 1024 }
    size            = 2
    max_age_seconds = 3600
  }]
}
