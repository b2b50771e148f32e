package provider

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework-validators/float64validator"
	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
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
	_ resource.ResourceWithConfigure   = (*projectResource)(nil)
	_ resource.ResourceWithImportState = (*projectResource)(nil)
)

func newProjectResource() resource.Resource { return &projectResource{} }

// projectResource declares a project, which gives it a quota. Projects exist
// implicitly (any sandbox names one); the resource manages the declaration only, and
// destroying it leaves the project implicit again, with no quota.
type projectResource struct{ c *client.Client }

type projectModel struct {
	ID    types.String  `tfsdk:"id"`
	Org   types.String  `tfsdk:"org"`
	Name  types.String  `tfsdk:"name"`
	Quota types.Object  `tfsdk:"quota"`
	Usage types.Object  `tfsdk:"usage"`
	Cost  types.Float64 `tfsdk:"cost"`
}

// quotaTypes is both the quota's and the usage's shape.
var quotaTypes = map[string]attr.Type{
	"sandboxes": types.Int64Type, "cpu": types.Float64Type, "memory_mib": types.Int64Type, "disk_gib": types.Int64Type,
}

func quotaValue(sandboxes int64, cpu float64, memoryMiB, diskGiB int64) types.Object {
	return types.ObjectValueMust(quotaTypes, map[string]attr.Value{
		"sandboxes":  types.Int64Value(sandboxes),
		"cpu":        types.Float64Value(cpu),
		"memory_mib": types.Int64Value(memoryMiB),
		"disk_gib":   types.Int64Value(diskGiB),
	})
}

type quotaModel struct {
	Sandboxes types.Int64   `tfsdk:"sandboxes"`
	CPU       types.Float64 `tfsdk:"cpu"`
	MemoryMiB types.Int64   `tfsdk:"memory_mib"`
	DiskGiB   types.Int64   `tfsdk:"disk_gib"`
}

// projectID is the resource ID and import ID, "org/name".
func projectID(org, name string) string { return org + "/" + name }

func (r *projectResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_project"
}

func (r *projectResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	replace := []planmodifier.String{stringplanmodifier.RequiresReplace()}
	usage := func(what string) string {
		return what + " of the project's sandboxes that are not terminated or failed, at the last refresh."
	}
	resp.Schema = schema.Schema{
		MarkdownDescription: "Declares a project and its quota. Projects exist without a declaration (a sandbox " +
			"or a project token naming one is enough) and then have no quota; declaring one limits what its " +
			"sandboxes that are not terminated or failed may request together, and a create that would go over " +
			"is refused with `quota_exceeded`. Lowering a quota below the current usage refuses new sandboxes " +
			"only. A quota on cpu, memory or disk needs every sandbox of the project to request that " +
			"resource (the pool's default size cannot be counted). Destroying the resource, which the daemon " +
			"refuses while the project has sandboxes that are not terminated, removes the declaration (the " +
			"project is implicit again) and revokes the project's tokens. A declaration removed " +
			"outside Terraform is removed from the state with a warning, so the next plan declares it again; a " +
			"quota changed outside Terraform shows as an update that restores it. Needs an admin token.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{
				MarkdownDescription: "`org/name`.",
				Computed:            true,
				PlanModifiers:       []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
			},
			"org": schema.StringAttribute{
				MarkdownDescription: "Organisation of the project. Defaults to `default`. Changing it replaces the resource.",
				Optional:            true,
				Computed:            true,
				Default:             stringdefault.StaticString("default"),
				PlanModifiers:       replace,
			},
			"name": schema.StringAttribute{
				MarkdownDescription: "The project's name, as sandboxes and project tokens name it. Changing it replaces the resource.",
				Required:            true,
				PlanModifiers:       replace,
			},
			"quota": schema.SingleNestedAttribute{
				MarkdownDescription: "Limits on what the project's sandboxes that are not terminated or failed request " +
					"together. Each limit left out, or 0, is unlimited; left out entirely, the project is declared with " +
					"no limits.",
				Optional: true,
				Computed: true,
				Default:  objectdefault.StaticValue(quotaValue(0, 0, 0, 0)),
				Attributes: map[string]schema.Attribute{
					"sandboxes": schema.Int64Attribute{
						MarkdownDescription: "Most sandboxes at once. 0 (the default) is unlimited.",
						Optional:            true, Computed: true, Default: int64default.StaticInt64(0),
						Validators: []validator.Int64{int64validator.Between(0, api.MaxQuotaSandboxes)},
					},
					"cpu": schema.Float64Attribute{
						MarkdownDescription: "Most vCPUs requested together. 0 (the default) is unlimited.",
						Optional:            true, Computed: true, Default: float64default.StaticFloat64(0),
						Validators: []validator.Float64{float64validator.Between(0, api.MaxQuotaCPU)},
					},
					"memory_mib": schema.Int64Attribute{
						MarkdownDescription: "Most memory requested together, in MiB. 0 (the default) is unlimited.",
						Optional:            true, Computed: true, Default: int64default.StaticInt64(0),
						Validators: []validator.Int64{int64validator.Between(0, api.MaxQuotaMemoryMiB)},
					},
					"disk_gib": schema.Int64Attribute{
						MarkdownDescription: "Most disk requested together, in GiB. 0 (the default) is unlimited.",
						Optional:            true, Computed: true, Default: int64default.StaticInt64(0),
						Validators: []validator.Int64{int64validator.Between(0, api.MaxQuotaDiskGiB)},
					},
				},
			},
			// usage and cost change as sandboxes come and go. They are read-only and
			// carry no plan modifier: a refresh updates them without a diff, and a plan
			// that updates the project shows them as known after apply, which they are.
			"usage": schema.SingleNestedAttribute{
				MarkdownDescription: "What the project's sandboxes that are not terminated or failed request together, " +
					"at the last refresh. Read-only; its changes never show as a difference.",
				Computed: true,
				Attributes: map[string]schema.Attribute{
					"sandboxes":  schema.Int64Attribute{MarkdownDescription: usage("Number"), Computed: true},
					"cpu":        schema.Float64Attribute{MarkdownDescription: usage("vCPUs"), Computed: true},
					"memory_mib": schema.Int64Attribute{MarkdownDescription: usage("Memory in MiB"), Computed: true},
					"disk_gib":   schema.Int64Attribute{MarkdownDescription: usage("Disk in GiB"), Computed: true},
				},
			},
			"cost": schema.Float64Attribute{
				MarkdownDescription: "Accrued cost of all the project's sandboxes, terminated ones included, estimated " +
					"from each pool's cost model, at the last refresh. Read-only.",
				Computed: true,
			},
		},
	}
}

func (r *projectResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	r.c = resourceClient(req, resp)
}

func (m *projectModel) spec(ctx context.Context, diags *diag.Diagnostics) client.ProjectSpec {
	var q quotaModel
	if !m.Quota.IsNull() && !m.Quota.IsUnknown() {
		diags.Append(m.Quota.As(ctx, &q, objectAsOptions)...)
	}
	return client.ProjectSpec{Quota: &client.ProjectQuota{
		Sandboxes: ptr(int(q.Sandboxes.ValueInt64())),
		Cpu:       ptr(q.CPU.ValueFloat64()),
		MemoryMiB: ptr(q.MemoryMiB.ValueInt64()),
		DiskGiB:   ptr(q.DiskGiB.ValueInt64()),
	}}
}

func (m *projectModel) fromAPI(p *client.Project) {
	m.ID = types.StringValue(projectID(p.Org, p.Name))
	m.Org = types.StringValue(p.Org)
	m.Name = types.StringValue(p.Name)
	q := p.Quota
	m.Quota = quotaValue(int64(deref(q.Sandboxes)), deref(q.Cpu), deref(q.MemoryMiB), deref(q.DiskGiB))
	u := p.Usage
	m.Usage = quotaValue(int64(u.Sandboxes), u.Cpu, u.MemoryMiB, u.DiskGiB)
	m.Cost = types.Float64Value(p.Cost)
}

func (r *projectResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var m projectModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &m)...)
	spec := m.spec(ctx, &resp.Diagnostics)
	if resp.Diagnostics.HasError() {
		return
	}
	org, name := m.Org.ValueString(), m.Name.ValueString()
	id := projectID(org, name)
	// PUT would silently take over a declaration someone else made (and the next
	// destroy would remove it): refuse, as a POST of an existing object would.
	existing, err := r.c.GetProject(ctx, org, name)
	if err != nil {
		resp.Diagnostics.AddError("Declaring project "+id+": checking for an existing declaration", apiError(err))
		return
	}
	if existing.Declared {
		resp.Diagnostics.AddError("Project "+id+" is already declared",
			fmt.Sprintf("The project already has a declaration (quota %s). Import it with\n\n"+
				"  terraform import <address> %s\n\nto manage it from this configuration.", describeQuota(existing.Quota), id))
		return
	}
	p, err := r.c.PutProject(ctx, org, name, spec)
	if err != nil {
		resp.Diagnostics.AddError("Declaring project "+id, apiError(err))
		return
	}
	m.fromAPI(p)
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
	setIdentity(ctx, resp.Identity, projectIdentity{Org: m.Org, Name: m.Name}, &resp.Diagnostics)
}

func (r *projectResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var m projectModel
	resp.Diagnostics.Append(req.State.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	// Set before any early return: Terraform before 1.12 keeps no identity, and the
	// framework refuses a read that leaves it empty, a removal from the state included.
	setIdentity(ctx, resp.Identity, projectIdentity{Org: m.Org, Name: m.Name}, &resp.Diagnostics)
	org, name := m.Org.ValueString(), m.Name.ValueString()
	id := projectID(org, name)
	p, err := r.c.GetProject(ctx, org, name)
	if err == nil && !p.Declared || client.IsNotFound(err) {
		resp.Diagnostics.AddWarning("Project "+id+" is no longer declared",
			"The project's declaration (its quota) was removed outside Terraform; it is removed from the state and "+
				"the next plan declares it again.")
		resp.State.RemoveResource(ctx)
		return
	}
	if err != nil {
		resp.Diagnostics.AddError("Reading project "+id, apiError(err))
		return
	}
	m.fromAPI(p)
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
	setIdentity(ctx, resp.Identity, projectIdentity{Org: m.Org, Name: m.Name}, &resp.Diagnostics)
}

func (r *projectResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var m projectModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &m)...)
	spec := m.spec(ctx, &resp.Diagnostics)
	if resp.Diagnostics.HasError() {
		return
	}
	org, name := m.Org.ValueString(), m.Name.ValueString()
	p, err := r.c.PutProject(ctx, org, name, spec)
	if err != nil {
		resp.Diagnostics.AddError("Updating project "+projectID(org, name), apiError(err))
		return
	}
	m.fromAPI(p)
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
	setIdentity(ctx, resp.Identity, projectIdentity{Org: m.Org, Name: m.Name}, &resp.Diagnostics)
}

func (r *projectResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var m projectModel
	resp.Diagnostics.Append(req.State.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	org, name := m.Org.ValueString(), m.Name.ValueString()
	id := projectID(org, name)
	err := r.c.DeleteProject(ctx, org, name)
	var apiErr *client.APIError
	switch {
	case err == nil, client.IsNotFound(err):
	case errors.As(err, &apiErr) && apiErr.Status == http.StatusConflict:
		resp.Diagnostics.AddError("Project "+id+" still has sandboxes",
			fmt.Sprintf("%s\n\nThe daemon keeps a project's declaration while any of its sandboxes is not terminated. "+
				"Delete them first; sandbox resources that reference this project (project = "+
				"differently_project.<name>.name) are destroyed before it in the same apply.", apiError(err)))
	default:
		resp.Diagnostics.AddError("Deleting project "+id, apiError(err))
	}
}

// ImportState takes `org/name`; a bare `name` means the `default` org.
func (r *projectResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	var org, name string
	if req.ID == "" && req.Identity != nil {
		var id projectIdentity
		resp.Diagnostics.Append(req.Identity.Get(ctx, &id)...)
		if resp.Diagnostics.HasError() {
			return
		}
		org, name = id.Org.ValueString(), id.Name.ValueString()
	} else if o, n, ok := strings.Cut(req.ID, "/"); ok {
		org, name = o, n
	} else {
		org, name = "default", req.ID
	}
	if org == "" || name == "" {
		resp.Diagnostics.AddError("Invalid import ID",
			fmt.Sprintf("%q is not a project: use org/name, for example default/ci.", req.ID))
		return
	}
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("id"), projectID(org, name))...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("org"), org)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("name"), name)...)
}

// describeQuota writes a quota for a diagnostic, such as "sandboxes 5, cpu 8".
func describeQuota(q client.ProjectQuota) string {
	var parts []string
	add := func(what string, v float64) {
		if v > 0 {
			parts = append(parts, fmt.Sprintf("%s %g", what, v))
		}
	}
	add("sandboxes", float64(deref(q.Sandboxes)))
	add("cpu", deref(q.Cpu))
	add("memory_mib", float64(deref(q.MemoryMiB)))
	add("disk_gib", float64(deref(q.DiskGiB)))
	if len(parts) == 0 {
		return "unlimited"
	}
	return strings.Join(parts, ", ")
}

func (r *projectResource) IdentitySchema(_ context.Context, _ resource.IdentitySchemaRequest, resp *resource.IdentitySchemaResponse) {
	resp.IdentitySchema = identityschema.Schema{Attributes: map[string]identityschema.Attribute{
		"org":  identityAttribute("The project's organization."),
		"name": identityAttribute("The project's name within its organization."),
	}}
}
