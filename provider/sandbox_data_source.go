package provider

import (
	"context"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/different-ai/differently/client"
)

var _ datasource.DataSourceWithConfigure = (*sandboxDataSource)(nil)

func newSandboxDataSource() datasource.DataSource { return &sandboxDataSource{} }

type sandboxDataSource struct{ c *client.Client }

type sandboxDataModel struct {
	ID           types.String  `tfsdk:"id"`
	Org          types.String  `tfsdk:"org"`
	Project      types.String  `tfsdk:"project"`
	State        types.String  `tfsdk:"state"`
	Pool         types.String  `tfsdk:"pool"`
	Region       types.String  `tfsdk:"region"`
	BackendRef   types.String  `tfsdk:"backend_ref"`
	Template     types.String  `tfsdk:"template"`
	Capabilities types.Set     `tfsdk:"capabilities"`
	Resources    types.Object  `tfsdk:"resources"`
	Labels       types.Map     `tfsdk:"labels"`
	TTLSeconds   types.Int64   `tfsdk:"ttl_seconds"`
	ExpiresAt    types.String  `tfsdk:"expires_at"`
	FromSnapshot types.String  `tfsdk:"from_snapshot"`
	InitCommands types.List    `tfsdk:"init_commands"`
	Reason       types.String  `tfsdk:"reason"`
	Cost         types.Float64 `tfsdk:"cost"`
	CreatedAt    types.String  `tfsdk:"created_at"`
}

func (d *sandboxDataSource) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_sandbox"
}

func (d *sandboxDataSource) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	str := func(desc string) schema.StringAttribute {
		return schema.StringAttribute{MarkdownDescription: desc, Computed: true}
	}
	resp.Schema = schema.Schema{
		MarkdownDescription: "One sandbox by ID, as the daemon sees it now (any state, terminated included).",
		Attributes: map[string]schema.Attribute{
			"id":           schema.StringAttribute{MarkdownDescription: "The sandbox ID.", Required: true},
			"org":          str("Organisation."),
			"project":      str("Project."),
			"state":        str("`queued`, `provisioning`, `running`, `stopped`, `paused`, `terminating`, `terminated` or `failed`."),
			"pool":         str("Pool the sandbox was placed on, once placed."),
			"region":       str("Region of that pool."),
			"backend_ref":  str("The backend's own ID of the instance."),
			"template":     str("Template."),
			"capabilities": schema.SetAttribute{MarkdownDescription: "Requested features.", Computed: true, ElementType: types.StringType},
			"resources": schema.SingleNestedAttribute{
				MarkdownDescription: "Requested resources (0 is the pool's default).",
				Computed:            true,
				Attributes: map[string]schema.Attribute{
					"cpu":        schema.Float64Attribute{MarkdownDescription: "vCPUs.", Computed: true},
					"memory_mib": schema.Int64Attribute{MarkdownDescription: "Memory in MiB.", Computed: true},
					"disk_gib":   schema.Int64Attribute{MarkdownDescription: "Disk in GiB.", Computed: true},
				},
			},
			"labels":        schema.MapAttribute{MarkdownDescription: "Labels.", Computed: true, ElementType: types.StringType},
			"ttl_seconds":   schema.Int64Attribute{MarkdownDescription: "Lifetime in seconds; null for none.", Computed: true},
			"expires_at":    str("When the sandbox expires (RFC 3339), if it does."),
			"from_snapshot": str("Snapshot it was restored from."),
			"init_commands": schema.ListAttribute{
				MarkdownDescription: "The commands its creator recorded to run once it runs (a `differently_sandbox`'s " +
					"`init_commands`); null when it recorded none.",
				Computed: true, ElementType: types.StringType,
			},
			"reason":     str("Why the sandbox waits or failed, in words."),
			"cost":       schema.Float64Attribute{MarkdownDescription: "Estimated cost so far, from the pool's cost model.", Computed: true},
			"created_at": str("When it was created (RFC 3339)."),
		},
	}
}

func (d *sandboxDataSource) Configure(_ context.Context, req datasource.ConfigureRequest, resp *datasource.ConfigureResponse) {
	d.c = dataSourceClient(req, resp)
}

func (d *sandboxDataSource) Read(ctx context.Context, req datasource.ReadRequest, resp *datasource.ReadResponse) {
	var m sandboxDataModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	sb, err := d.c.GetSandbox(ctx, m.ID.ValueString())
	if err != nil {
		resp.Diagnostics.AddError("Reading sandbox "+m.ID.ValueString(), apiError(err))
		return
	}
	// The resource's conversion does the shared part. Not the arguments a profile
	// may have filled in: the resource keeps what its configuration said of them,
	// the data source has no configuration and reports what the sandbox has.
	var rm sandboxModel
	rm.fromAPI(ctx, sb, &resp.Diagnostics)
	m.Org, m.Project, m.Pool, m.Region, m.BackendRef = rm.Org, rm.Project, rm.Pool, rm.Region, rm.BackendRef
	m.State = types.StringValue(string(sb.State))
	m.Resources, m.Labels, m.FromSnapshot = rm.Resources, rm.Labels, rm.FromSnapshot
	m.InitCommands = stringList(types.ListNull(types.StringType), deref(sb.InitCommands))
	m.Template = optString(types.StringNull(), sb.Template)
	m.Capabilities = stringSet(types.SetNull(types.StringType), sb.Capabilities)
	m.TTLSeconds = types.Int64Null()
	if ttl := deref(sb.TtlSeconds); ttl > 0 {
		m.TTLSeconds = types.Int64Value(ttl)
	}
	m.Reason = optString(types.StringNull(), sb.Reason)
	m.ExpiresAt = types.StringNull()
	if sb.ExpiresAt != nil {
		m.ExpiresAt = types.StringValue(sb.ExpiresAt.UTC().Format(time.RFC3339Nano))
	}
	m.Cost = types.Float64Value(deref(sb.Cost))
	m.CreatedAt = types.StringValue(sb.CreatedAt.UTC().Format(time.RFC3339Nano))
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}
