package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/different-ai/differently/client"
)

var _ datasource.DataSourceWithConfigure = (*poolDataSource)(nil)

func newPoolDataSource() datasource.DataSource { return &poolDataSource{} }

type poolDataSource struct{ c *client.Client }

func (d *poolDataSource) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_pool"
}

func (d *poolDataSource) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	warm, warmStatus := warmDataSourceAttributes()
	resp.Schema = schema.Schema{
		MarkdownDescription: "One pool by name, with its health and effective features: for pools declared in the " +
			"daemon's config file, or managed elsewhere. Needs an admin token.",
		Attributes: map[string]schema.Attribute{
			"id":      schema.StringAttribute{MarkdownDescription: "The pool's name.", Computed: true},
			"name":    schema.StringAttribute{MarkdownDescription: "Name of the pool to read.", Required: true},
			"adapter": schema.StringAttribute{MarkdownDescription: "Adapter kind.", Computed: true},
			"trust":   schema.StringAttribute{MarkdownDescription: "`private` or `external`.", Computed: true},
			"region":  schema.StringAttribute{MarkdownDescription: "Region the pool serves.", Computed: true},
			"max_concurrency": schema.Int64Attribute{
				MarkdownDescription: "Most sandboxes alive at once; 0 is no limit.", Computed: true,
			},
			"max_starting": schema.Int64Attribute{
				MarkdownDescription: "Most sandboxes provisioning at once; 0 is no limit.", Computed: true,
			},
			"cost_model": schema.SingleNestedAttribute{
				MarkdownDescription: "Prices used to estimate cost.",
				Computed:            true,
				Attributes: map[string]schema.Attribute{
					"cpu_hour":        schema.Float64Attribute{MarkdownDescription: "Price of one vCPU-hour.", Computed: true},
					"memory_gib_hour": schema.Float64Attribute{MarkdownDescription: "Price of one GiB-hour of memory.", Computed: true},
				},
			},
			"config": schema.DynamicAttribute{MarkdownDescription: "The adapter's configuration keys.", Computed: true},
			"credentials_env": schema.StringAttribute{
				MarkdownDescription: "Environment variable holding the adapter's secret.", Computed: true,
			},
			"features": schema.SetAttribute{
				MarkdownDescription: "Features declared by the operator.", Computed: true, ElementType: types.StringType,
			},
			"source":  schema.StringAttribute{MarkdownDescription: sourceDescription, Computed: true},
			"healthy": schema.BoolAttribute{MarkdownDescription: "Whether the last health probe succeeded.", Computed: true},
			"effective_features": schema.SetAttribute{
				MarkdownDescription: "Features the pool really offers.", Computed: true, ElementType: types.StringType,
			},
			"warm":        warm,
			"warm_status": warmStatus,
		},
	}
}

func (d *poolDataSource) Configure(_ context.Context, req datasource.ConfigureRequest, resp *datasource.ConfigureResponse) {
	d.c = dataSourceClient(req, resp)
}

func (d *poolDataSource) Read(ctx context.Context, req datasource.ReadRequest, resp *datasource.ReadResponse) {
	var m poolModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	p, err := d.c.GetPool(ctx, m.Name.ValueString())
	if err != nil {
		resp.Diagnostics.AddError("Reading pool "+m.Name.ValueString(), apiError(err))
		return
	}
	m.fromAPI(p, &resp.Diagnostics)
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}
