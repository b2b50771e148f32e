package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/identityschema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/int64planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/different-ai/differently/client"
)

var (
	_ resource.ResourceWithConfigure   = (*snapshotResource)(nil)
	_ resource.ResourceWithImportState = (*snapshotResource)(nil)
)

func newSnapshotResource() resource.Resource { return &snapshotResource{} }

type snapshotResource struct{ c *client.Client }

type snapshotModel struct {
	ID        types.String `tfsdk:"id"`
	SandboxID types.String `tfsdk:"sandbox_id"`
	Kind      types.String `tfsdk:"kind"`
	Pool      types.String `tfsdk:"pool"`
	SizeBytes types.Int64  `tfsdk:"size_bytes"`
	CreatedAt types.String `tfsdk:"created_at"`
}

func (r *snapshotResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_snapshot"
}

func (r *snapshotResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	keep := []planmodifier.String{stringplanmodifier.UseStateForUnknown()}
	resp.Schema = schema.Schema{
		MarkdownDescription: "A snapshot of a sandbox, to restore new sandboxes from (`differently_sandbox.from_snapshot`). " +
			"The pool must offer `snapshots.disk` or `snapshots.memory`. Snapshots are immutable: any change replaces " +
			"the snapshot. A snapshot deleted outside Terraform is removed from the state with a warning.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{
				MarkdownDescription: "The snapshot ID (`snap_...`).",
				Computed:            true,
				PlanModifiers:       keep,
			},
			"sandbox_id": schema.StringAttribute{
				MarkdownDescription: "ID of the sandbox to snapshot. It must be running (or stopped, where the pool allows).",
				Required:            true,
				PlanModifiers:       []planmodifier.String{stringplanmodifier.RequiresReplace()},
			},
			"kind": schema.StringAttribute{
				MarkdownDescription: "`disk` (the default) or `memory`.",
				Optional:            true,
				Computed:            true,
				Default:             stringdefault.StaticString("disk"),
				Validators:          []validator.String{stringvalidator.OneOf("disk", "memory")},
				PlanModifiers:       []planmodifier.String{stringplanmodifier.RequiresReplace()},
			},
			"pool": schema.StringAttribute{
				MarkdownDescription: "Pool holding the snapshot; sandboxes restored from it are placed there.",
				Computed:            true,
				PlanModifiers:       keep,
			},
			"size_bytes": schema.Int64Attribute{
				MarkdownDescription: "Size of the snapshot in bytes, as the backend reports it.",
				Computed:            true,
				PlanModifiers:       []planmodifier.Int64{int64planmodifier.UseStateForUnknown()},
			},
			"created_at": schema.StringAttribute{
				MarkdownDescription: "When the snapshot was taken (RFC 3339).",
				Computed:            true,
				PlanModifiers:       keep,
			},
		},
	}
}

func (r *snapshotResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	r.c = resourceClient(req, resp)
}

func (m *snapshotModel) fromAPI(s *client.Snapshot) {
	m.ID = types.StringValue(s.Id)
	m.SandboxID = types.StringValue(s.SandboxId)
	m.Kind = types.StringValue(string(s.Kind))
	m.Pool = types.StringValue(deref(s.Pool))
	m.SizeBytes = types.Int64Value(s.SizeBytes)
	m.CreatedAt = types.StringValue(s.CreatedAt.UTC().Format("2006-01-02T15:04:05.999999999Z07:00"))
}

func (r *snapshotResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var m snapshotModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	s, err := r.c.CreateSnapshot(ctx, m.SandboxID.ValueString(), m.Kind.ValueString())
	if err != nil {
		resp.Diagnostics.AddError("Snapshotting sandbox "+m.SandboxID.ValueString(), apiError(err))
		return
	}
	m.fromAPI(s)
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
	setIdentity(ctx, resp.Identity, idIdentity{ID: m.ID}, &resp.Diagnostics)
}

func (r *snapshotResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var m snapshotModel
	resp.Diagnostics.Append(req.State.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	// Set before any early return: Terraform before 1.12 keeps no identity, and the
	// framework refuses a read that leaves it empty, a removal from the state included.
	setIdentity(ctx, resp.Identity, idIdentity{ID: m.ID}, &resp.Diagnostics)
	id := m.ID.ValueString()
	s, err := r.c.GetSnapshot(ctx, id)
	if client.IsNotFound(err) {
		resp.Diagnostics.AddWarning("Snapshot "+id+" is gone",
			"The snapshot was deleted outside Terraform; it is removed from the state and the next plan takes it again.")
		resp.State.RemoveResource(ctx)
		return
	}
	if err != nil {
		resp.Diagnostics.AddError("Reading snapshot "+id, apiError(err))
		return
	}
	m.fromAPI(s)
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
	setIdentity(ctx, resp.Identity, idIdentity{ID: m.ID}, &resp.Diagnostics)
}

// Update is never called with a change: every argument requires replacement.
func (r *snapshotResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var m snapshotModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &m)...)
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
	setIdentity(ctx, resp.Identity, idIdentity{ID: m.ID}, &resp.Diagnostics)
}

func (r *snapshotResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var m snapshotModel
	resp.Diagnostics.Append(req.State.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if err := r.c.DeleteSnapshot(ctx, m.ID.ValueString()); err != nil && !client.IsNotFound(err) {
		resp.Diagnostics.AddError("Deleting snapshot "+m.ID.ValueString(), apiError(err))
	}
}

// ImportState takes the snapshot ID, as the ID or as the identity.
func (r *snapshotResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	importByIDOrIdentity(ctx, "id", req, resp)
}

func (r *snapshotResource) IdentitySchema(_ context.Context, _ resource.IdentitySchemaRequest, resp *resource.IdentitySchemaResponse) {
	resp.IdentitySchema = identityschema.Schema{Attributes: map[string]identityschema.Attribute{
		"id": identityAttribute("The snapshot's ID."),
	}}
}
