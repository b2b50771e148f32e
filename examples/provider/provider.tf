terraform {
  required_providers {
    differently = {
      source = "different-ai/differently"
    }
  }
}

# endpoint and token may also come from DIFFERENTLY_ENDPOINT and DIFFERENTLY_TOKEN.
provider "differently" {
  endpoint = "http://127.0.0.1:8700"
  token    = var.differently_token
}

variable "differently_token" {
  type      = string
  sensitive = true
}
