data "differently_pool" "devhost" {
  name = "devhost"
}

output "devhost_features" {
  value = data.differently_pool.devhost.effective_features
}
