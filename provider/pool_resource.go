package provider

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-validators/float64validator"
	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/identityschema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/float64default"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/int64default"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/objectdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/client"
)

var (
	_ resource.ResourceWithConfigure   = (*poolResource)(nil)
	_ resource.ResourceWithImportState = (*poolResource)(nil)
)

func newPoolResource() resource.Resource { return &poolResource{} }

type poolResource struct{ c *client.Client }

type poolModel struct {
	ID                types.String  `tfsdk:"id"`
	Name              types.String  `tfsdk:"name"`
	Adapter           types.String  `tfsdk:"adapter"`
	Trust             types.String  `tfsdk:"trust"`
	Region            types.String  `tfsdk:"region"`
	MaxConcurrency    types.Int64   `tfsdk:"max_concurrency"`
	MaxStarting       types.Int64   `tfsdk:"max_starting"`
	CostModel         types.Object  `tfsdk:"cost_model"`
	Config            types.Dynamic `tfsdk:"config"`
	CredentialsEnv    types.String  `tfsdk:"credentials_env"`
	Features          types.Set     `tfsdk:"features"`
	Source            types.String  `tfsdk:"source"`
	Healthy           types.Bool    `tfsdk:"healthy"`
	EffectiveFeatures types.Set     `tfsdk:"effective_features"`
	Warm              types.List    `tfsdk:"warm"`
	WarmStatus        types.List    `tfsdk:"warm_status"`
}

var costModelTypes = map[string]attr.Type{"cpu_hour": types.Float64Type, "memory_gib_hour": types.Float64Type}

const configDescription = "The adapter's configuration keys, as an object whose values may nest " +
	"(strings, numbers, booleans, lists and objects), for example `{ root = \"/var/lib/sandboxes\" }` for " +
	"`devhost` or `{ createErrors = [\"sandbox_failed\"] }` for `fake`. Keys are the adapter's own, in its " +
	"spelling (camelCase). Compared as JSON after every read, so the way a value is written never shows as a " +
	"difference. Secrets do not belong here: name an environment variable in `credentials_env`."

const sourceDescription = "Where the pool is defined: `api` for a pool created through the API or Terraform, " +
	"`config` for one the daemon's config file defines. The daemon refuses to change or delete a `config` pool " +
	"through the API, so Terraform cannot manage one: a pool of that name in the file makes create, update and " +
	"delete fail, saying so. A pool the file stops naming becomes `api` at the daemon's next start."

func (r *poolResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_pool"
}

func (r *poolResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	resp.Schema = schema.Schema{
		MarkdownDescription: "A pool: one backend reached through an execution adapter, with its trust, " +
			"capacity limits and cost model. Pools edited through the admin API show the difference on the next " +
			"plan, and apply restores the configuration. Needs an admin token.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{
				MarkdownDescription: "The pool's name.",
				Computed:            true,
				PlanModifiers:       []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
			},
			"name": schema.StringAttribute{
				MarkdownDescription: "Unique name: 1 to 63 lowercase letters, digits and dashes. Changing it replaces the pool.",
				Required:            true,
				PlanModifiers:       []planmodifier.String{stringplanmodifier.RequiresReplace()},
				Validators:          nameValidators(),
			},
			"adapter": schema.StringAttribute{
				MarkdownDescription: "Adapter kind, such as `opensandbox`, `daytona`, `freestyle`, `remote`, or in " +
					"development mode `devhost` and `fake`. Changing it replaces the pool.",
				Required:      true,
				PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()},
			},
			"trust": schema.StringAttribute{
				MarkdownDescription: "`private` (your own infrastructure) or `external` (a third party, which receives " +
					"work only when the policy allows it). Defaults to `private`.",
				Optional:   true,
				Computed:   true,
				Default:    stringdefault.StaticString("private"),
				Validators: []validator.String{stringvalidator.OneOf("private", "external")},
			},
			"region": schema.StringAttribute{
				MarkdownDescription: "Region the pool serves, matched against a sandbox's `placement.regions`.",
				Optional:            true,
			},
			"max_concurrency": schema.Int64Attribute{
				MarkdownDescription: "Most sandboxes alive on the pool at once; 0 (the default) means no limit.",
				Optional:            true,
				Computed:            true,
				Default:             int64default.StaticInt64(0),
				Validators:          []validator.Int64{int64validator.AtLeast(0)},
			},
			"max_starting": schema.Int64Attribute{
				MarkdownDescription: "Most sandboxes being provisioned on the pool at once, per daemon replica; 0 (the " +
					"default) means the daemon's `scheduler.defaultMaxStarting` (8 unless its config file says otherwise).",
				Optional:   true,
				Computed:   true,
				Default:    int64default.StaticInt64(0),
				Validators: []validator.Int64{int64validator.AtLeast(0)},
			},
			"cost_model": schema.SingleNestedAttribute{
				MarkdownDescription: "Prices used to estimate a sandbox's cost from its requested resources. Defaults to zero prices.",
				Optional:            true,
				Computed:            true,
				Default: objectdefault.StaticValue(types.ObjectValueMust(costModelTypes, map[string]attr.Value{
					"cpu_hour": types.Float64Value(0), "memory_gib_hour": types.Float64Value(0),
				})),
				Attributes: map[string]schema.Attribute{
					"cpu_hour": schema.Float64Attribute{
						MarkdownDescription: "Price of one vCPU for one hour. Defaults to 0.",
						Optional:            true, Computed: true, Default: float64default.StaticFloat64(0),
						Validators: []validator.Float64{float64validator.AtLeast(0)},
					},
					"memory_gib_hour": schema.Float64Attribute{
						MarkdownDescription: "Price of one GiB of memory for one hour. Defaults to 0.",
						Optional:            true, Computed: true, Default: float64default.StaticFloat64(0),
						Validators: []validator.Float64{float64validator.AtLeast(0)},
					},
				},
			},
			"config": schema.DynamicAttribute{
				MarkdownDescription: configDescription,
				Optional:            true,
			},
			"credentials_env": schema.StringAttribute{
				MarkdownDescription: "Name of the environment variable that holds the adapter's secret on every " +
					"daemon replica. The secret itself never passes through Terraform. The daemon's own variables " +
					"(`DIFFERENTLY_*`) and its database driver's (`PG*`) are refused, and so is any variable off the " +
					"daemon's `poolCredentials.allowedEnv` when its operator sets one (checked at apply).",
				Optional:   true,
				Validators: []validator.String{credentialsEnvValidator{}},
			},
			"features": schema.SetAttribute{
				MarkdownDescription: "Features the operator declares for the pool (for example `lifecycle.stop-start`, " +
					"`isolation.microvm`). Left out, the adapter's own list applies.",
				Optional:    true,
				ElementType: types.StringType,
			},
			"source": schema.StringAttribute{
				MarkdownDescription: sourceDescription,
				Computed:            true,
				// Only a daemon's start changes it, never an apply.
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
			},
			"healthy": schema.BoolAttribute{
				MarkdownDescription: "Whether the pool's last health probe succeeded.",
				Computed:            true,
			},
			"effective_features": schema.SetAttribute{
				MarkdownDescription: "Features the pool really offers: the declared ones the adapter implements.",
				Computed:            true,
				ElementType:         types.StringType,
			},
			"warm":        warmAttribute(),
			"warm_status": warmStatusAttribute(),
		},
	}
}

func (r *poolResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	r.c = resourceClient(req, resp)
}

// spec builds the full definition PUT and POST take from a plan.
func (m *poolModel) spec(ctx context.Context, diags *diag.Diagnostics) client.PoolSpec {
	s := client.PoolSpec{
		Name:           m.Name.ValueString(),
		Adapter:        m.Adapter.ValueString(),
		Region:         strPtr(m.Region),
		MaxConcurrency: ptr(int(m.MaxConcurrency.ValueInt64())),
		MaxStarting:    ptr(int(m.MaxStarting.ValueInt64())),
		Features:       ptr(stringsOf(ctx, m.Features, diags)),
		Credentials:    &client.Credentials{Env: strPtr(m.CredentialsEnv)},
	}
	if *s.Features == nil {
		s.Features = nil
	}
	if t := m.Trust.ValueString(); t != "" {
		s.Trust = ptr(client.PoolSpecTrust(t))
	}
	if !m.CostModel.IsNull() && !m.CostModel.IsUnknown() {
		var cm struct {
			CPUHour       types.Float64 `tfsdk:"cpu_hour"`
			MemoryGiBHour types.Float64 `tfsdk:"memory_gib_hour"`
		}
		diags.Append(m.CostModel.As(ctx, &cm, objectAsOptions)...)
		s.CostModel = &client.CostModel{CpuHour: ptr(cm.CPUHour.ValueFloat64()), MemoryGiBHour: ptr(cm.MemoryGiBHour.ValueFloat64())}
	}
	cfg, err := dynamicToObject("config", m.Config)
	if err != nil {
		diags.AddAttributeError(path.Root("config"), "Invalid pool config", err.Error())
	}
	// PUT replaces the whole definition, so an absent config is sent as {} to clear it.
	if cfg == nil {
		cfg = map[string]any{}
	}
	s.Config = &cfg
	s.Warm = warmSpec(ctx, m.Warm, diags)
	return s
}

// fromAPI copies the pool as the daemon reports it into the model, keeping prior
// values where the API's answer means the same thing (see dynamicObject, stringSet).
func (m *poolModel) fromAPI(p *client.Pool, diags *diag.Diagnostics) {
	m.ID = types.StringValue(p.Name)
	m.Name = types.StringValue(p.Name)
	m.Adapter = types.StringValue(p.Adapter)
	m.Trust = types.StringValue(string(p.Trust))
	m.Region = optString(m.Region, p.Region)
	m.MaxConcurrency = types.Int64Value(int64(p.MaxConcurrency))
	m.MaxStarting = types.Int64Value(int64(p.MaxStarting))
	m.CostModel = types.ObjectValueMust(costModelTypes, map[string]attr.Value{
		"cpu_hour":        types.Float64Value(deref(p.CostModel.CpuHour)),
		"memory_gib_hour": types.Float64Value(deref(p.CostModel.MemoryGiBHour)),
	})
	cfg, err := dynamicObject(m.Config, p.Config)
	if err != nil {
		diags.AddAttributeError(path.Root("config"), "Unreadable pool config", err.Error())
	}
	m.Config = cfg
	var env *string
	if p.Credentials != nil {
		env = p.Credentials.Env
	}
	m.CredentialsEnv = optString(m.CredentialsEnv, env)
	m.Features = stringSet(m.Features, p.Features)
	m.Source = types.StringValue(string(deref(p.Source)))
	m.Healthy = types.BoolValue(deref(p.Healthy))
	m.EffectiveFeatures = computedStringSet(deref(p.EffectiveFeatures))
	m.Warm = warmValue(m.Warm, deref(p.Warm))
	m.WarmStatus = warmStatusValue(deref(p.WarmStatus))
}

func (r *poolResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var plan poolModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	spec := plan.spec(ctx, &resp.Diagnostics)
	if resp.Diagnostics.HasError() {
		return
	}
	p, err := r.c.CreatePool(ctx, spec)
	if err != nil {
		resp.Diagnostics.AddError("Creating pool "+spec.Name, apiError(err))
		return
	}
	plan.fromAPI(p, &resp.Diagnostics)
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
	setIdentity(ctx, resp.Identity, nameIdentity{Name: plan.Name}, &resp.Diagnostics)
}

func (r *poolResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var state poolModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	// Set before any early return: Terraform before 1.12 keeps no identity, and the
	// framework refuses a read that leaves it empty, a removal from the state included.
	setIdentity(ctx, resp.Identity, nameIdentity{Name: state.Name}, &resp.Diagnostics)
	name := state.Name.ValueString()
	if name == "" {
		name = state.ID.ValueString()
	}
	p, err := r.c.GetPool(ctx, name)
	if client.IsNotFound(err) {
		resp.Diagnostics.AddWarning("Pool "+name+" is gone",
			"The pool was deleted outside Terraform; it is removed from the state and the next plan creates it again.")
		resp.State.RemoveResource(ctx)
		return
	}
	if err != nil {
		resp.Diagnostics.AddError("Reading pool "+name, apiError(err))
		return
	}
	state.fromAPI(p, &resp.Diagnostics)
	resp.Diagnostics.Append(resp.State.Set(ctx, &state)...)
	setIdentity(ctx, resp.Identity, nameIdentity{Name: state.Name}, &resp.Diagnostics)
}

func (r *poolResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var plan poolModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	spec := plan.spec(ctx, &resp.Diagnostics)
	if resp.Diagnostics.HasError() {
		return
	}
	// PUT, not PATCH: the configuration is the whole truth, so fields an operator
	// changed through the admin API are restored too.
	p, err := r.c.PutPool(ctx, spec.Name, spec)
	if err != nil {
		resp.Diagnostics.AddError("Updating pool "+spec.Name, apiError(err))
		return
	}
	plan.fromAPI(p, &resp.Diagnostics)
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
	setIdentity(ctx, resp.Identity, nameIdentity{Name: plan.Name}, &resp.Diagnostics)
}

func (r *poolResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var state poolModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	name := state.Name.ValueString()
	ctx, cancel := context.WithTimeout(ctx, defaultDeleteTimeout)
	defer cancel()
	tick := time.NewTicker(deletePoll)
	defer tick.Stop()
	for {
		// Not forced: a pool that still carries sandboxes is refused (409) rather than
		// having sandboxes Terraform may not manage terminated behind the user's back.
		err := r.c.DeletePool(ctx, name, false)
		switch {
		case err == nil, client.IsNotFound(err):
			return
		case !terminating(err):
			resp.Diagnostics.AddError("Deleting pool "+name, fmt.Sprintf("%s\n\nSandboxes still on the pool must be deleted first.", apiError(err)))
			return
		}
		// The daemon has cleared the pool's warm shapes and is ending their
		// sandboxes, and asks for the delete again once they are gone.
		select {
		case <-ctx.Done():
			resp.Diagnostics.AddError("Deleting pool "+name,
				fmt.Sprintf("%s\n\nThe pool's sandboxes were still terminating after %s.", apiError(err), defaultDeleteTimeout))
			return
		case <-tick.C:
		}
	}
}

// terminating says whether err is the daemon's answer to a pool delete that is
// ending sandboxes of the pool and is to be asked again when they are gone.
func terminating(err error) bool {
	e, ok := errors.AsType[*client.APIError](err)
	return ok && e.Code == api.CodeInvalidState && e.Details["terminating"] != nil
}

// ImportState takes the pool's name, as the ID or as the identity.
func (r *poolResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	importByIDOrIdentity(ctx, "name", req, resp)
	var name types.String
	resp.Diagnostics.Append(resp.State.GetAttribute(ctx, path.Root("name"), &name)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("id"), name)...)
}

func (r *poolResource) IdentitySchema(_ context.Context, _ resource.IdentitySchemaRequest, resp *resource.IdentitySchemaResponse) {
	resp.IdentitySchema = identityschema.Schema{Attributes: map[string]identityschema.Attribute{
		"name": identityAttribute("The pool's name."),
	}}
}

// deletePoll is how often Delete asks again while the pool's warm sandboxes end.
const deletePoll = 500 * time.Millisecond
