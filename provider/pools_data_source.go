package provider

import (
	"context"
	"encoding/json"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/different-ai/differently/client"
)

var _ datasource.DataSourceWithConfigure = (*poolsDataSource)(nil)

func newPoolsDataSource() datasource.DataSource { return &poolsDataSource{} }

type poolsDataSource struct{ c *client.Client }

type poolsModel struct {
	ID    types.String  `tfsdk:"id"`
	Pools []poolSummary `tfsdk:"pools"`
}

type poolSummary struct {
	Name              types.String `tfsdk:"name"`
	Adapter           types.String `tfsdk:"adapter"`
	Trust             types.String `tfsdk:"trust"`
	Region            types.String `tfsdk:"region"`
	MaxConcurrency    types.Int64  `tfsdk:"max_concurrency"`
	MaxStarting       types.Int64  `tfsdk:"max_starting"`
	ConfigJSON        types.String `tfsdk:"config_json"`
	Features          types.Set    `tfsdk:"features"`
	Source            types.String `tfsdk:"source"`
	Healthy           types.Bool   `tfsdk:"healthy"`
	EffectiveFeatures types.Set    `tfsdk:"effective_features"`
	Sandboxes         types.Int64  `tfsdk:"sandboxes"`
}

func (d *poolsDataSource) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_pools"
}

func (d *poolsDataSource) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	resp.Schema = schema.Schema{
		MarkdownDescription: "Every pool the daemon knows, sorted by name: those created through the API or " +
			"Terraform and those declared in its config file. Needs an admin token.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{MarkdownDescription: "Always `pools`.", Computed: true},
			"pools": schema.ListNestedAttribute{
				MarkdownDescription: "The pools.",
				Computed:            true,
				NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
					"name":            schema.StringAttribute{MarkdownDescription: "Name.", Computed: true},
					"adapter":         schema.StringAttribute{MarkdownDescription: "Adapter kind.", Computed: true},
					"trust":           schema.StringAttribute{MarkdownDescription: "`private` or `external`.", Computed: true},
					"region":          schema.StringAttribute{MarkdownDescription: "Region, or null.", Computed: true},
					"max_concurrency": schema.Int64Attribute{MarkdownDescription: "Most sandboxes alive at once; 0 is no limit.", Computed: true},
					"max_starting":    schema.Int64Attribute{MarkdownDescription: "Most sandboxes provisioning at once; 0 is no limit.", Computed: true},
					// A dynamic value cannot sit inside a list, so the config is JSON here;
					// jsondecode() gives the object back.
					"config_json": schema.StringAttribute{
						MarkdownDescription: "The adapter's configuration keys as a JSON object (use `jsondecode`).", Computed: true,
					},
					"features": schema.SetAttribute{
						MarkdownDescription: "Declared features.", Computed: true, ElementType: types.StringType,
					},
					"source": schema.StringAttribute{
						MarkdownDescription: "`config` for a pool of the daemon's config file, which only the file changes; `api` otherwise.", Computed: true,
					},
					"healthy": schema.BoolAttribute{MarkdownDescription: "Whether the last health probe succeeded.", Computed: true},
					"effective_features": schema.SetAttribute{
						MarkdownDescription: "Features the pool really offers.", Computed: true, ElementType: types.StringType,
					},
					"sandboxes": schema.Int64Attribute{
						MarkdownDescription: "Sandboxes on the pool that are not terminated or failed.", Computed: true,
					},
				}},
			},
		},
	}
}

func (d *poolsDataSource) Configure(_ context.Context, req datasource.ConfigureRequest, resp *datasource.ConfigureResponse) {
	d.c = dataSourceClient(req, resp)
}

func (d *poolsDataSource) Read(ctx context.Context, _ datasource.ReadRequest, resp *datasource.ReadResponse) {
	pools, err := d.c.ListPools(ctx)
	if err != nil {
		resp.Diagnostics.AddError("Listing pools", apiError(err))
		return
	}
	m := poolsModel{ID: types.StringValue("pools"), Pools: make([]poolSummary, 0, len(pools))}
	for _, p := range pools {
		cfg, err := json.Marshal(p.Config)
		if err != nil {
			resp.Diagnostics.AddError("Encoding the config of pool "+p.Name, err.Error())
			return
		}
		m.Pools = append(m.Pools, poolSummary{
			Name:              types.StringValue(p.Name),
			Adapter:           types.StringValue(p.Adapter),
			Trust:             types.StringValue(string(p.Trust)),
			Region:            optString(types.StringNull(), p.Region),
			MaxConcurrency:    types.Int64Value(int64(p.MaxConcurrency)),
			MaxStarting:       types.Int64Value(int64(p.MaxStarting)),
			ConfigJSON:        types.StringValue(string(cfg)),
			Features:          computedStringSet(p.Features),
			Source:            types.StringValue(string(deref(p.Source))),
			Healthy:           types.BoolValue(deref(p.Healthy)),
			EffectiveFeatures: computedStringSet(deref(p.EffectiveFeatures)),
			Sandboxes:         types.Int64Value(int64(deref(p.Sandboxes))),
		})
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}
