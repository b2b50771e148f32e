package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/booldefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/setdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/different-ai/differently/client"
)

var (
	_ resource.ResourceWithConfigure   = (*policyResource)(nil)
	_ resource.ResourceWithImportState = (*policyResource)(nil)
)

// policyID is the fixed ID of the deployment-wide placement policy.
const policyID = "policy"

func newPolicyResource() resource.Resource { return &policyResource{} }

// policyResource manages the singleton placement policy. There is always a policy, so
// Create overwrites whatever is there and Delete puts the defaults back, the way
// coderd's deployment-wide resources behave.
type policyResource struct{ c *client.Client }

type policyModel struct {
	ID            types.String  `tfsdk:"id"`
	AllowExternal types.Bool    `tfsdk:"allow_external"`
	ExternalPools types.Set     `tfsdk:"external_pools"`
	Defaults      types.Dynamic `tfsdk:"defaults"`
}

func (r *policyResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_policy"
}

func (r *policyResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	resp.Schema = schema.Schema{
		MarkdownDescription: "The deployment-wide placement policy. There is exactly one: creating this resource " +
			"takes over the current policy, and destroying it resets the policy to its defaults (no external " +
			"placement, no external pools, no defaults). Declare it once per deployment. Needs an admin token.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{
				MarkdownDescription: "Always `policy`.",
				Computed:            true,
				PlanModifiers:       []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
			},
			"allow_external": schema.BoolAttribute{
				MarkdownDescription: "Whether work may go to pools whose trust is `external` at all. Defaults to `false`.",
				Optional:            true,
				Computed:            true,
				Default:             booldefault.StaticBool(false),
			},
			"external_pools": schema.SetAttribute{
				MarkdownDescription: "The external pools that may receive work when `allow_external` is true. " +
					"Pools may be named before they exist. Defaults to none.",
				Optional:    true,
				Computed:    true,
				ElementType: types.StringType,
				Default:     setdefault.StaticValue(types.SetValueMust(types.StringType, nil)),
			},
			"defaults": schema.DynamicAttribute{
				MarkdownDescription: "Deployment-wide defaults applied to sandbox requests, as a free-form object " +
					"whose keys the daemon defines. Compared as JSON after every read.",
				Optional: true,
			},
		},
	}
}

func (r *policyResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	r.c = resourceClient(req, resp)
}

func (m *policyModel) toAPI(ctx context.Context, diags *diag.Diagnostics) client.Policy {
	pools := stringsOf(ctx, m.ExternalPools, diags)
	if pools == nil {
		pools = []string{}
	}
	p := client.Policy{AllowExternal: ptr(m.AllowExternal.ValueBool()), ExternalPools: &pools}
	d, err := dynamicToObject("defaults", m.Defaults)
	if err != nil {
		diags.AddAttributeError(path.Root("defaults"), "Invalid policy defaults", err.Error())
	}
	if d != nil {
		p.Defaults = &d
	}
	return p
}

func (m *policyModel) fromAPI(p *client.Policy, diags *diag.Diagnostics) {
	m.ID = types.StringValue(policyID)
	m.AllowExternal = types.BoolValue(deref(p.AllowExternal))
	m.ExternalPools = computedStringSet(deref(p.ExternalPools))
	d, err := dynamicObject(m.Defaults, deref(p.Defaults))
	if err != nil {
		diags.AddAttributeError(path.Root("defaults"), "Unreadable policy defaults", err.Error())
	}
	m.Defaults = d
}

func (r *policyResource) put(ctx context.Context, plan tfsdkGetter, state tfsdkSetter, diags *diag.Diagnostics) {
	var m policyModel
	diags.Append(plan.Get(ctx, &m)...)
	body := m.toAPI(ctx, diags)
	if diags.HasError() {
		return
	}
	p, err := r.c.PutPolicy(ctx, body)
	if err != nil {
		diags.AddError("Setting the placement policy", apiError(err))
		return
	}
	m.fromAPI(p, diags)
	diags.Append(state.Set(ctx, &m)...)
}

func (r *policyResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	r.put(ctx, req.Plan, &resp.State, &resp.Diagnostics)
}

func (r *policyResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	r.put(ctx, req.Plan, &resp.State, &resp.Diagnostics)
}

func (r *policyResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var m policyModel
	resp.Diagnostics.Append(req.State.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	p, err := r.c.GetPolicy(ctx)
	if err != nil {
		resp.Diagnostics.AddError("Reading the placement policy", apiError(err))
		return
	}
	m.fromAPI(p, &resp.Diagnostics)
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

// Delete resets the policy to its defaults: the singleton cannot be removed.
func (r *policyResource) Delete(ctx context.Context, _ resource.DeleteRequest, resp *resource.DeleteResponse) {
	_, err := r.c.PutPolicy(ctx, defaultPolicy())
	if err != nil {
		resp.Diagnostics.AddError("Resetting the placement policy", apiError(err))
	}
}

func defaultPolicy() client.Policy {
	return client.Policy{AllowExternal: ptr(false), ExternalPools: &[]string{}}
}

// ImportState ignores the ID: there is one policy. Any ID (conventionally `policy`) works.
func (r *policyResource) ImportState(ctx context.Context, _ resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("id"), policyID)...)
}
