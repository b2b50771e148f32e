data "differently_pools" "all" {}

output "unhealthy_pools" {
  value = [for p in data.differently_pools.all.pools : p.name if !p.healthy]
}
