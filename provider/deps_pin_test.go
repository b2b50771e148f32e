package provider

// Pinned until the acceptance tests import it.
import _ "github.com/hashicorp/terraform-plugin-testing/helper/resource"
