package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework-validators/float64validator"
	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/float64default"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/int64default"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/objectdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/client"
)

var (
	_ resource.ResourceWithConfigure   = (*profileResource)(nil)
	_ resource.ResourceWithImportState = (*profileResource)(nil)
)

func newProfileResource() resource.Resource { return &profileResource{} }

// profileResource manages a named bundle of sandbox settings. A sandbox naming it
// gets the settings when it is created; later changes do not reach it.
type profileResource struct{ c *client.Client }

type profileModel struct {
	ID           types.String `tfsdk:"id"`
	Name         types.String `tfsdk:"name"`
	Capabilities types.Set    `tfsdk:"capabilities"`
	Resources    types.Object `tfsdk:"resources"`
	Template     types.String `tfsdk:"template"`
	Placement    types.Object `tfsdk:"placement"`
	TTLSeconds   types.Int64  `tfsdk:"ttl_seconds"`
}

func resourcesValue(r client.Resources) types.Object {
	return types.ObjectValueMust(resourcesTypes, map[string]attr.Value{
		"cpu":        types.Float64Value(r.CPU),
		"memory_mib": types.Int64Value(r.MemoryMiB),
		"disk_gib":   types.Int64Value(r.DiskGiB),
	})
}

func (r *profileResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_profile"
}

func (r *profileResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	resp.Schema = schema.Schema{
		MarkdownDescription: "A profile: a named bundle of sandbox settings managed by operators. A sandbox created " +
			"with `profile = <name>` gets the profile's capabilities added to its own, and its resources (field by " +
			"field), template, placement (field by field) and TTL wherever the sandbox leaves them unset. Changes " +
			"to a profile apply to sandboxes created afterwards, never to existing ones. A profile changed outside " +
			"Terraform shows as an update that restores it; one deleted outside Terraform is removed from the " +
			"state with a warning, so the next plan creates it again. Needs an admin token.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{
				MarkdownDescription: "The profile's name.",
				Computed:            true,
				PlanModifiers:       []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
			},
			"name": schema.StringAttribute{
				MarkdownDescription: "Unique name: 1 to 63 lowercase letters, digits and dashes, starting and ending " +
					"with a letter or digit. Changing it replaces the profile.",
				Required:      true,
				PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()},
				Validators:    nameValidators(),
			},
			"capabilities": schema.SetAttribute{
				MarkdownDescription: "Features added to every sandbox created from the profile, such as `exec` or " +
					"`lifecycle.stop-start`.",
				Optional:    true,
				ElementType: types.StringType,
			},
			"resources": schema.SingleNestedAttribute{
				MarkdownDescription: "Resources a sandbox gets where its own request leaves them out (or 0). Each " +
					"value left out, or 0, leaves the pool's default.",
				Optional: true,
				Computed: true,
				Default:  objectdefault.StaticValue(resourcesValue(client.Resources{})),
				Attributes: map[string]schema.Attribute{
					"cpu": schema.Float64Attribute{
						MarkdownDescription: "vCPUs. Defaults to 0 (not set by the profile).",
						Optional:            true, Computed: true, Default: float64default.StaticFloat64(0),
						Validators: []validator.Float64{float64validator.Between(0, api.MaxCPU)},
					},
					"memory_mib": schema.Int64Attribute{
						MarkdownDescription: "Memory in MiB. Defaults to 0 (not set by the profile).",
						Optional:            true, Computed: true, Default: int64default.StaticInt64(0),
						Validators: []validator.Int64{int64validator.Between(0, api.MaxMemoryMiB)},
					},
					"disk_gib": schema.Int64Attribute{
						MarkdownDescription: "Disk in GiB. Defaults to 0 (not set by the profile).",
						Optional:            true, Computed: true, Default: int64default.StaticInt64(0),
						Validators: []validator.Int64{int64validator.Between(0, api.MaxDiskGiB)},
					},
				},
			},
			"template": schema.StringAttribute{
				MarkdownDescription: "Template (image) for sandboxes that name none.",
				Optional:            true,
			},
			"placement": schema.SingleNestedAttribute{
				MarkdownDescription: "Where sandboxes may run, list by list, for sandboxes that leave it out.",
				Optional:            true,
				Attributes: map[string]schema.Attribute{
					"allowed_pools": schema.ListAttribute{
						MarkdownDescription: "Pools sandboxes may be placed on.",
						Optional:            true,
						ElementType:         types.StringType,
					},
					"regions": schema.ListAttribute{
						MarkdownDescription: "Acceptable regions, preferred first.",
						Optional:            true,
						ElementType:         types.StringType,
					},
				},
			},
			"ttl_seconds": schema.Int64Attribute{
				MarkdownDescription: "Lifetime in seconds of sandboxes that do not set `ttl_seconds`. 0 (the default) " +
					"means they do not expire.",
				Optional:   true,
				Computed:   true,
				Default:    int64default.StaticInt64(0),
				Validators: []validator.Int64{int64validator.Between(0, api.MaxTTLSeconds)},
			},
		},
	}
}

func (r *profileResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	r.c = resourceClient(req, resp)
}

// spec builds the whole profile PUT takes: an attribute left out is sent empty, so
// that whatever was set outside Terraform is cleared.
func (m *profileModel) spec(ctx context.Context, diags *diag.Diagnostics) client.ProfileSpec {
	caps := stringsOf(ctx, m.Capabilities, diags)
	if caps == nil {
		caps = []string{}
	}
	var res struct {
		CPU       types.Float64 `tfsdk:"cpu"`
		MemoryMiB types.Int64   `tfsdk:"memory_mib"`
		DiskGiB   types.Int64   `tfsdk:"disk_gib"`
	}
	if !m.Resources.IsNull() && !m.Resources.IsUnknown() {
		diags.Append(m.Resources.As(ctx, &res, objectAsOptions)...)
	}
	pl := placementModel{AllowedPools: types.ListNull(types.StringType), Regions: types.ListNull(types.StringType)}
	if !m.Placement.IsNull() && !m.Placement.IsUnknown() {
		diags.Append(m.Placement.As(ctx, &pl, objectAsOptions)...)
	}
	pools, regions := stringsOf(ctx, pl.AllowedPools, diags), stringsOf(ctx, pl.Regions, diags)
	if pools == nil {
		pools = []string{}
	}
	if regions == nil {
		regions = []string{}
	}
	return client.ProfileSpec{
		Capabilities: &caps,
		Resources:    &client.Resources{CPU: res.CPU.ValueFloat64(), MemoryMiB: res.MemoryMiB.ValueInt64(), DiskGiB: res.DiskGiB.ValueInt64()},
		Template:     ptr(m.Template.ValueString()),
		Placement:    &client.Placement{AllowedPools: &pools, Regions: &regions},
		TtlSeconds:   ptr(m.TTLSeconds.ValueInt64()),
	}
}

// fromAPI copies the profile into the model, keeping the prior value's choice of
// null or empty where the API's answer means the same thing.
func (m *profileModel) fromAPI(ctx context.Context, p *client.Profile, diags *diag.Diagnostics) {
	m.ID = types.StringValue(p.Name)
	m.Name = types.StringValue(p.Name)
	m.Capabilities = stringSet(m.Capabilities, p.Capabilities)
	m.Resources = resourcesValue(p.Resources)
	m.Template = optString(m.Template, p.Template)
	m.Placement = placementValue(ctx, m.Placement, p.Placement, false, diags)
	m.TTLSeconds = types.Int64Value(p.TtlSeconds)
}

// placementValue maps the API's placement to a placement object. A null prior stays
// null when the API has none; each list keeps the prior's null-or-empty choice. With
// keepNulls (a sandbox made from a profile, whose placement the profile may have
// filled in), a null prior, or a null or empty list in it, stays as it is whatever
// the API says.
func placementValue(ctx context.Context, prior types.Object, p *client.Placement, keepNulls bool, diags *diag.Diagnostics) types.Object {
	var pools, regions []string
	if p != nil {
		pools, regions = deref(p.AllowedPools), deref(p.Regions)
	}
	priorNull := prior.IsNull() || prior.IsUnknown()
	if priorNull && (keepNulls || len(pools) == 0 && len(regions) == 0) {
		return types.ObjectNull(placementTypes)
	}
	pl := placementModel{AllowedPools: types.ListNull(types.StringType), Regions: types.ListNull(types.StringType)}
	if !priorNull {
		diags.Append(prior.As(ctx, &pl, objectAsOptions)...)
	}
	list := func(prior types.List, items []string) types.List {
		if keepNulls && (prior.IsNull() || len(prior.Elements()) == 0) {
			return prior
		}
		return stringList(prior, items)
	}
	return types.ObjectValueMust(placementTypes, map[string]attr.Value{
		"allowed_pools": list(pl.AllowedPools, pools),
		"regions":       list(pl.Regions, regions),
	})
}

func (r *profileResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var m profileModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &m)...)
	spec := m.spec(ctx, &resp.Diagnostics)
	if resp.Diagnostics.HasError() {
		return
	}
	name := m.Name.ValueString()
	// PUT would silently take over a profile made elsewhere: refuse, as a POST would.
	_, err := r.c.GetProfile(ctx, name)
	switch {
	case err == nil:
		resp.Diagnostics.AddError("Profile "+name+" already exists",
			"Import it with\n\n  terraform import <address> "+name+"\n\nto manage it from this configuration.")
		return
	case !client.IsNotFound(err):
		resp.Diagnostics.AddError("Creating profile "+name+": checking that it does not exist yet", apiError(err))
		return
	}
	p, err := r.c.PutProfile(ctx, name, spec)
	if err != nil {
		resp.Diagnostics.AddError("Creating profile "+name, apiError(err))
		return
	}
	m.fromAPI(ctx, p, &resp.Diagnostics)
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

func (r *profileResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var m profileModel
	resp.Diagnostics.Append(req.State.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	name := m.Name.ValueString()
	if name == "" {
		name = m.ID.ValueString()
	}
	p, err := r.c.GetProfile(ctx, name)
	if client.IsNotFound(err) {
		resp.Diagnostics.AddWarning("Profile "+name+" is gone",
			"The profile was deleted outside Terraform; it is removed from the state and the next plan creates it again.")
		resp.State.RemoveResource(ctx)
		return
	}
	if err != nil {
		resp.Diagnostics.AddError("Reading profile "+name, apiError(err))
		return
	}
	m.fromAPI(ctx, p, &resp.Diagnostics)
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

func (r *profileResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var m profileModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &m)...)
	spec := m.spec(ctx, &resp.Diagnostics)
	if resp.Diagnostics.HasError() {
		return
	}
	name := m.Name.ValueString()
	p, err := r.c.PutProfile(ctx, name, spec)
	if err != nil {
		resp.Diagnostics.AddError("Updating profile "+name, apiError(err))
		return
	}
	m.fromAPI(ctx, p, &resp.Diagnostics)
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

// Delete removes the profile. Sandboxes made from it keep what it gave them.
func (r *profileResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var m profileModel
	resp.Diagnostics.Append(req.State.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	name := m.Name.ValueString()
	if err := r.c.DeleteProfile(ctx, name); err != nil && !client.IsNotFound(err) {
		resp.Diagnostics.AddError("Deleting profile "+name, apiError(err))
	}
}

// ImportState takes the profile's name.
func (r *profileResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("name"), req.ID)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("id"), req.ID)...)
}
