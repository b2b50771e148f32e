package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/different-ai/differently/client"
)

var _ datasource.DataSourceWithConfigure = (*trustReportDataSource)(nil)

func newTrustReportDataSource() datasource.DataSource { return &trustReportDataSource{} }

type trustReportDataSource struct{ c *client.Client }

type trustReportModel struct {
	ID            types.String  `tfsdk:"id"`
	AllowExternal types.Bool    `tfsdk:"allow_external"`
	ExternalPools types.Set     `tfsdk:"external_pools"`
	Pools         []trustedPool `tfsdk:"pools"`
}

type trustedPool struct {
	Name         types.String `tfsdk:"name"`
	Adapter      types.String `tfsdk:"adapter"`
	Trust        types.String `tfsdk:"trust"`
	AdapterClaim types.String `tfsdk:"adapter_claim"`
	Isolation    types.String `tfsdk:"isolation"`
	ReceivesWork types.Bool   `tfsdk:"receives_work"`
	Note         types.String `tfsdk:"note"`
}

func (d *trustReportDataSource) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_trust_report"
}

func (d *trustReportDataSource) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	resp.Schema = schema.Schema{
		MarkdownDescription: "Each pool's trust and isolation, and whether the current policy lets it receive work: " +
			"a check to put in front of a policy change (for example with a `check` block). Needs an admin token.",
		Attributes: map[string]schema.Attribute{
			"id":             schema.StringAttribute{MarkdownDescription: "Always `trust`.", Computed: true},
			"allow_external": schema.BoolAttribute{MarkdownDescription: "The policy's `allow_external`.", Computed: true},
			"external_pools": schema.SetAttribute{
				MarkdownDescription: "The policy's `external_pools`.", Computed: true, ElementType: types.StringType,
			},
			"pools": schema.ListNestedAttribute{
				MarkdownDescription: "Every pool, sorted by name.",
				Computed:            true,
				NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
					"name":    schema.StringAttribute{MarkdownDescription: "Pool name.", Computed: true},
					"adapter": schema.StringAttribute{MarkdownDescription: "Adapter kind.", Computed: true},
					"trust": schema.StringAttribute{
						MarkdownDescription: "The operator's setting, which is authoritative.", Computed: true,
					},
					"adapter_claim": schema.StringAttribute{MarkdownDescription: "What the adapter says of itself.", Computed: true},
					"isolation":     schema.StringAttribute{MarkdownDescription: "The adapter's isolation, in words.", Computed: true},
					"receives_work": schema.BoolAttribute{
						MarkdownDescription: "Whether placement may use the pool under the current policy.", Computed: true,
					},
					"note": schema.StringAttribute{MarkdownDescription: "Why, when it is worth saying.", Computed: true},
				}},
			},
		},
	}
}

func (d *trustReportDataSource) Configure(_ context.Context, req datasource.ConfigureRequest, resp *datasource.ConfigureResponse) {
	d.c = dataSourceClient(req, resp)
}

func (d *trustReportDataSource) Read(ctx context.Context, _ datasource.ReadRequest, resp *datasource.ReadResponse) {
	rep, err := d.c.GetTrustReport(ctx)
	if err != nil {
		resp.Diagnostics.AddError("Reading the trust report", apiError(err))
		return
	}
	m := trustReportModel{
		ID:            types.StringValue("trust"),
		AllowExternal: types.BoolValue(rep.AllowExternal),
		ExternalPools: computedStringSet(deref(rep.ExternalPools)),
		Pools:         make([]trustedPool, 0, len(rep.Pools)),
	}
	for _, p := range rep.Pools {
		m.Pools = append(m.Pools, trustedPool{
			Name:         types.StringValue(p.Name),
			Adapter:      types.StringValue(p.Adapter),
			Trust:        types.StringValue(p.Trust),
			AdapterClaim: optString(types.StringNull(), p.AdapterClaim),
			Isolation:    optString(types.StringNull(), p.Isolation),
			ReceivesWork: types.BoolValue(p.ReceivesWork),
			Note:         optString(types.StringNull(), p.Note),
		})
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}
