// Package provider is the Terraform provider for Differently
// (registry.terraform.io/different-ai/differently).
//
// Resources and data sources arrive with the provider work; until then the provider
// serves an empty schema so the binary builds and Terraform can load it.
package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/provider"
	"github.com/hashicorp/terraform-plugin-framework/provider/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource"
)

// Address is the provider's registry address.
const Address = "registry.terraform.io/different-ai/differently"

// New returns a constructor for the provider at the given version.
func New(version string) func() provider.Provider {
	return func() provider.Provider { return &differentlyProvider{version: version} }
}

type differentlyProvider struct {
	version string
}

func (p *differentlyProvider) Metadata(_ context.Context, _ provider.MetadataRequest, resp *provider.MetadataResponse) {
	resp.TypeName = "differently"
	resp.Version = p.version
}

func (p *differentlyProvider) Schema(_ context.Context, _ provider.SchemaRequest, resp *provider.SchemaResponse) {
	resp.Schema = schema.Schema{
		Description: "Manages pools, placement policy and sandboxes of a Differently control plane.",
	}
}

func (p *differentlyProvider) Configure(context.Context, provider.ConfigureRequest, *provider.ConfigureResponse) {
}

func (p *differentlyProvider) Resources(context.Context) []func() resource.Resource { return nil }

func (p *differentlyProvider) DataSources(context.Context) []func() datasource.DataSource { return nil }
