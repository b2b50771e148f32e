package provider

import (
	"context"
	"fmt"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/list"
	"github.com/hashicorp/terraform-plugin-framework/list/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/different-ai/differently/client"
)

var _ list.ListResourceWithConfigure = (*poolList)(nil)

func newPoolList() list.ListResource { return &poolList{} }

// poolList finds the pools Terraform could manage for `terraform query`.
type poolList struct{ lister }

type poolListConfig struct {
	Adapter types.String `tfsdk:"adapter"`
}

func (l *poolList) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_pool"
}

func (l *poolList) ListResourceConfigSchema(_ context.Context, _ list.ListResourceSchemaRequest, resp *list.ListResourceSchemaResponse) {
	resp.Schema = schema.Schema{
		Description: "Finds pools, for `terraform query` (Terraform 1.14 or later) and the import blocks it generates: " +
			"those created through the API (`source = \"api\"`). Pools of the daemon's config file are left out, " +
			"since the daemon refuses to let Terraform change or delete them. Admin tokens only.",
		Attributes: map[string]schema.Attribute{
			"adapter": schema.StringAttribute{
				Optional:    true,
				Description: "Only pools of this adapter, for example `opensandbox`.",
			},
		},
	}
}

func (l *poolList) List(ctx context.Context, req list.ListRequest, stream *list.ListResultsStream) {
	var cfg poolListConfig
	if diags := req.Config.Get(ctx, &cfg); diags.HasError() {
		stream.Results = list.ListResultsStreamDiagnostics(diags)
		return
	}
	if l.c == nil {
		stream.Results = list.ListResultsStreamDiagnostics(unconfigured("Listing pools"))
		return
	}
	stream.Results = func(push func(list.ListResult) bool) {
		pushAll(ctx, req, push, "pools",
			func() ([]client.Pool, error) { return l.c.ListPools(ctx) },
			func(p *client.Pool) bool {
				a := cfg.Adapter.ValueString()
				return deref(p.Source) != client.PoolOriginConfig && (a == "" || p.Adapter == a)
			},
			func(p *client.Pool) (string, any) {
				return fmt.Sprintf("%s (%s, trust %s)", p.Name, p.Adapter, p.Trust), nameIdentity{Name: types.StringValue(p.Name)}
			},
			func(m *poolModel, p *client.Pool, diags *diag.Diagnostics) { m.fromAPI(p, diags) })
	}
}
