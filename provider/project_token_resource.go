package provider

import (
	"context"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/different-ai/differently/client"
)

var (
	_ resource.ResourceWithConfigure   = (*projectTokenResource)(nil)
	_ resource.ResourceWithImportState = (*projectTokenResource)(nil)
)

func newProjectTokenResource() resource.Resource { return &projectTokenResource{} }

// projectTokenResource issues a token scoped to one project. The daemon shows the
// secret once, in the create answer, so it lives only in the Terraform state.
type projectTokenResource struct{ c *client.Client }

type projectTokenModel struct {
	ID        types.String `tfsdk:"id"`
	Org       types.String `tfsdk:"org"`
	Project   types.String `tfsdk:"project"`
	Name      types.String `tfsdk:"name"`
	Secret    types.String `tfsdk:"secret"`
	CreatedAt types.String `tfsdk:"created_at"`
}

func (r *projectTokenResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_project_token"
}

func (r *projectTokenResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	replace := []planmodifier.String{stringplanmodifier.RequiresReplace()}
	keep := []planmodifier.String{stringplanmodifier.UseStateForUnknown()}
	resp.Schema = schema.Schema{
		MarkdownDescription: "An API token scoped to one project: it sees and creates that project's sandboxes only. " +
			"The secret is shown once by the daemon and kept (sensitive) in the Terraform state; protect the state " +
			"accordingly. Any change issues a new token and revokes the old one. A token revoked outside Terraform " +
			"is removed from the state with a warning. Needs an admin token.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{
				MarkdownDescription: "The token's ID (`tok_...`), which is not a secret.",
				Computed:            true,
				PlanModifiers:       keep,
			},
			"org": schema.StringAttribute{
				MarkdownDescription: "Organisation of the project. Defaults to `default`.",
				Optional:            true,
				Computed:            true,
				Default:             stringdefault.StaticString("default"),
				PlanModifiers:       replace,
			},
			"project": schema.StringAttribute{
				MarkdownDescription: "Project the token acts for. Projects need no declaration: a name is enough.",
				Required:            true,
				PlanModifiers:       replace,
			},
			"name": schema.StringAttribute{
				MarkdownDescription: "A label for people, shown when tokens are listed.",
				Optional:            true,
				PlanModifiers:       replace,
			},
			"secret": schema.StringAttribute{
				MarkdownDescription: "The bearer secret (`dly_...`). Unknown after an import: the daemon keeps only its hash.",
				Computed:            true,
				Sensitive:           true,
				PlanModifiers:       keep,
			},
			"created_at": schema.StringAttribute{
				MarkdownDescription: "When the token was issued (RFC 3339).",
				Computed:            true,
				PlanModifiers:       keep,
			},
		},
	}
}

func (r *projectTokenResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	r.c = resourceClient(req, resp)
}

func (m *projectTokenModel) fromAPI(t *client.Token) {
	m.ID = types.StringValue(t.Id)
	m.Org = types.StringValue(deref(t.Org))
	m.Project = types.StringValue(deref(t.Project))
	m.Name = optString(m.Name, t.Name)
	m.CreatedAt = types.StringValue(t.CreatedAt.UTC().Format(time.RFC3339Nano))
}

func (r *projectTokenResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var m projectTokenModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	out, err := r.c.CreateToken(ctx, client.TokenCreate{
		Scope:   client.TokenCreateScopeProject,
		Org:     strPtr(m.Org),
		Project: strPtr(m.Project),
		Name:    strPtr(m.Name),
	})
	if err != nil {
		resp.Diagnostics.AddError("Creating a token for project "+m.Project.ValueString(), apiError(err))
		return
	}
	m.fromAPI(&out.Token)
	m.Secret = types.StringValue(out.Secret)
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

func (r *projectTokenResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var m projectTokenModel
	resp.Diagnostics.Append(req.State.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	// There is no GET of one token: the list is small (tokens are issued by people).
	toks, err := r.c.ListTokens(ctx)
	if err != nil {
		resp.Diagnostics.AddError("Listing tokens", apiError(err))
		return
	}
	id := m.ID.ValueString()
	for i := range toks {
		if toks[i].Id == id {
			if toks[i].Scope != client.TokenScopeProject {
				resp.Diagnostics.AddError("Token "+id+" is not a project token",
					"differently_project_token manages project tokens only; this one is "+string(toks[i].Scope)+".")
				return
			}
			m.fromAPI(&toks[i])
			if m.Secret.IsUnknown() {
				m.Secret = types.StringNull()
			}
			resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
			return
		}
	}
	resp.Diagnostics.AddWarning("Token "+id+" is gone",
		"The token was revoked outside Terraform; it is removed from the state and the next plan issues a new one.")
	resp.State.RemoveResource(ctx)
}

// Update is never called with a change: every argument requires replacement.
func (r *projectTokenResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var m projectTokenModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &m)...)
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

func (r *projectTokenResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var m projectTokenModel
	resp.Diagnostics.Append(req.State.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if err := r.c.DeleteToken(ctx, m.ID.ValueString()); err != nil && !client.IsNotFound(err) {
		resp.Diagnostics.AddError("Revoking token "+m.ID.ValueString(), apiError(err))
	}
}

// ImportState takes the token ID. The secret cannot be imported.
func (r *projectTokenResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("id"), req.ID)...)
}
