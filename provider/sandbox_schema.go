package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework-validators/float64validator"
	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/float64planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/int64planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/listplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/mapplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/objectplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/different-ai/differently/api"
)

type sandboxModel struct {
	ID           types.String `tfsdk:"id"`
	Org          types.String `tfsdk:"org"`
	Project      types.String `tfsdk:"project"`
	Template     types.String `tfsdk:"template"`
	Profile      types.String `tfsdk:"profile"`
	Capabilities types.Set    `tfsdk:"capabilities"`
	Resources    types.Object `tfsdk:"resources"`
	Env          types.Map    `tfsdk:"env"`
	EnvWO        types.Map    `tfsdk:"env_wo"` // always null: Terraform passes it only in the configuration
	EnvWOVersion types.Int64  `tfsdk:"env_wo_version"`
	Labels       types.Map    `tfsdk:"labels"`
	TTLSeconds   types.Int64  `tfsdk:"ttl_seconds"`
	Placement    types.Object `tfsdk:"placement"`
	FromSnapshot types.String `tfsdk:"from_snapshot"`
	InitCommands types.List   `tfsdk:"init_commands"`
	State        types.String `tfsdk:"state"`
	Pool         types.String `tfsdk:"pool"`
	Region       types.String `tfsdk:"region"`
	BackendRef   types.String `tfsdk:"backend_ref"`
	Status       types.String `tfsdk:"status"`
	Timeouts     types.Object `tfsdk:"timeouts"`
}

var (
	resourcesTypes = map[string]attr.Type{"cpu": types.Float64Type, "memory_mib": types.Int64Type, "disk_gib": types.Int64Type}
	placementTypes = map[string]attr.Type{
		"allowed_pools": types.ListType{ElemType: types.StringType},
		"regions":       types.ListType{ElemType: types.StringType},
	}
)

// Desired states a configuration may ask for.
const (
	wantRunning = "running"
	wantStopped = "stopped"
	wantPaused  = "paused"
)

func (r *sandboxResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	replace := []planmodifier.String{stringplanmodifier.RequiresReplace()}
	keep := []planmodifier.String{stringplanmodifier.UseStateForUnknown()}
	resp.Schema = schema.Schema{
		MarkdownDescription: "A long-lived sandbox, for example a CI runner. Create waits until it runs, then " +
			"runs `init_commands` once. On refresh, a sandbox deleted, expired, failed or lost outside Terraform is " +
			"removed from the state with a warning (the next plan creates it again), and one stopped or paused " +
			"outside Terraform shows an in-place update back to the configured `state`. `labels` and `ttl_seconds` " +
			"change in place; other arguments replace the sandbox. Secrets for the sandbox's environment belong in " +
			"`env_wo`, which Terraform never stores.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{
				MarkdownDescription: "The sandbox ID (`sbx_...`).",
				Computed:            true,
				PlanModifiers:       keep,
			},
			"org": schema.StringAttribute{
				MarkdownDescription: "Organisation to create the sandbox in. Admin tokens only; defaults to the daemon's " +
					"(`default`), and a project token always uses its own.",
				Optional:      true,
				Computed:      true,
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown(), stringplanmodifier.RequiresReplace()},
			},
			"project": schema.StringAttribute{
				MarkdownDescription: "Project to create the sandbox in. Admin tokens only; defaults to the daemon's " +
					"(`default`), and a project token always uses its own.",
				Optional:      true,
				Computed:      true,
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown(), stringplanmodifier.RequiresReplace()},
			},
			"template": schema.StringAttribute{
				MarkdownDescription: "Template (image) the sandbox starts from, in the pool's terms. Changing it " +
					"replaces the sandbox (after an import from a profile, see `profile`).",
				Optional:      true,
				PlanModifiers: []planmodifier.String{templateReplaceIf()},
			},
			"profile": schema.StringAttribute{
				MarkdownDescription: "Name of a profile (see `differently_profile`) to create the sandbox from: its " +
					"capabilities are added to the sandbox's, and its template, resources, placement and TTL fill in " +
					"whatever the sandbox leaves out. What the profile contributes is never shown as a difference, " +
					"and later changes to the profile do not reach the sandbox. Changing it replaces the sandbox. The " +
					"daemon keeps only the merged values, so after an import the first plan compares `capabilities`, " +
					"`template` and `placement` with them the way the daemon merges: each capability named must be " +
					"one the sandbox has, and a template or placement list named must be the sandbox's (left out or " +
					"empty, anything the sandbox has may have come from the profile). A configuration that fits is " +
					"recorded in place; any other difference replaces the sandbox.",
				Optional:      true,
				PlanModifiers: replace,
			},
			"capabilities": schema.SetAttribute{
				MarkdownDescription: "Features the pool must offer, such as `exec`, `files` or `lifecycle.stop-start`. " +
					"Changing them replaces the sandbox (after an import from a profile, see `profile`).",
				Optional:      true,
				ElementType:   types.StringType,
				PlanModifiers: []planmodifier.Set{capabilitiesReplaceIf()},
			},
			"resources": schema.SingleNestedAttribute{
				MarkdownDescription: "Requested resources; a value left out (or 0) is the pool's default.",
				Optional:            true,
				Computed:            true,
				PlanModifiers:       []planmodifier.Object{objectplanmodifier.UseStateForUnknown(), objectplanmodifier.RequiresReplace()},
				Attributes: map[string]schema.Attribute{
					"cpu": schema.Float64Attribute{
						MarkdownDescription: "vCPUs.",
						Optional:            true, Computed: true,
						PlanModifiers: []planmodifier.Float64{float64planmodifier.UseStateForUnknown()},
						Validators:    []validator.Float64{float64validator.Between(0, api.MaxCPU)},
					},
					"memory_mib": schema.Int64Attribute{
						MarkdownDescription: "Memory in MiB.",
						Optional:            true, Computed: true,
						PlanModifiers: []planmodifier.Int64{int64planmodifier.UseStateForUnknown()},
						Validators:    []validator.Int64{int64validator.Between(0, api.MaxMemoryMiB)},
					},
					"disk_gib": schema.Int64Attribute{
						MarkdownDescription: "Disk in GiB.",
						Optional:            true, Computed: true,
						PlanModifiers: []planmodifier.Int64{int64planmodifier.UseStateForUnknown()},
						Validators:    []validator.Int64{int64validator.Between(0, api.MaxDiskGiB)},
					},
				},
			},
			"env": schema.MapAttribute{
				MarkdownDescription: "Environment variables of the sandbox. Write-only on the daemon (never read back), " +
					"so a change made outside Terraform cannot be seen; changing it replaces the sandbox. After an import the " +
					"first plan records the configured value in place, since the daemon cannot say what it was. Terraform " +
					"keeps these values in the state, in plain text for whoever can read it: secrets belong in `env_wo`.",
				Optional:    true,
				Sensitive:   true,
				ElementType: types.StringType,
				PlanModifiers: []planmodifier.Map{mapplanmodifier.RequiresReplaceIf(
					func(ctx context.Context, req planmodifier.MapRequest, resp *mapplanmodifier.RequiresReplaceIfFuncResponse) {
						resp.RequiresReplace = !knownOnlyByImport(ctx, req.StateValue.IsNull(), req.Private, &resp.Diagnostics)
					}, replaceUnlessImported, replaceUnlessImported)},
			},
			"env_wo": schema.MapAttribute{
				MarkdownDescription: "More environment variables of the sandbox, write-only: Terraform never stores them " +
					"in the plan or the state, so they may come from ephemeral values (Terraform 1.11 or later). They are " +
					"read once, when the sandbox is created, and a change to them alone is not seen: change " +
					"`env_wo_version` to replace the sandbox with the new values. A name may be in `env` or in `env_wo`, " +
					"not in both. Set `env_wo_version` with them: after an import, that is what makes sure they reach the " +
					"sandbox (see there).",
				Optional:    true,
				WriteOnly:   true,
				Sensitive:   true,
				ElementType: types.StringType,
			},
			"env_wo_version": schema.Int64Attribute{
				MarkdownDescription: "A number of your choosing, stored in the state in place of `env_wo`: changing it " +
					"replaces the sandbox, which is how new `env_wo` values reach it. An imported sandbox whose " +
					"configuration sets it is replaced at the first plan: neither Terraform nor the daemon can tell " +
					"which secrets it was created with, and a secret taken as delivered when it was not would fail " +
					"later and silently.",
				Optional:      true,
				PlanModifiers: []planmodifier.Int64{int64planmodifier.RequiresReplace()},
			},
			"labels": schema.MapAttribute{
				MarkdownDescription: "Labels, changed in place. Keys starting with `differently.dev/` are reserved.",
				Optional:            true,
				ElementType:         types.StringType,
			},
			"ttl_seconds": schema.Int64Attribute{
				MarkdownDescription: "Lifetime in seconds from when the sandbox starts running; a change counts from " +
					"the time of the update. Left out or 0, the sandbox does not expire (with a `profile`, left out means the " +
					"profile's TTL, where 0 is no expiry too). Once expired it is removed " +
					"from the state on the next refresh. After an import, a configured TTL the sandbox already has is " +
					"recorded without restarting it.",
				Optional:   true,
				Validators: []validator.Int64{int64validator.Between(0, api.MaxTTLSeconds)},
			},
			"placement": schema.SingleNestedAttribute{
				MarkdownDescription: "Where the sandbox may run. Changing it replaces the sandbox (after an import " +
					"from a profile, see `profile`).",
				Optional:      true,
				PlanModifiers: []planmodifier.Object{placementReplaceIf()},
				Attributes: map[string]schema.Attribute{
					"allowed_pools": schema.ListAttribute{
						MarkdownDescription: "Pools the sandbox may be placed on; left out, any pool the policy allows.",
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
			"from_snapshot": schema.StringAttribute{
				MarkdownDescription: "ID of a snapshot (of the same project) to restore from.",
				Optional:            true,
				PlanModifiers:       replace,
			},
			"init_commands": schema.ListAttribute{
				MarkdownDescription: "Shell commands (`/bin/sh -c`) run once, in order, when the sandbox first runs. " +
					"A non-zero exit fails the create with the command's output; the sandbox is then tainted and " +
					"replaced by the next apply. Changing the list replaces the sandbox. The daemon records the list with " +
					"the sandbox (it never runs it), so an import reads it back; for a sandbox made before the daemon " +
					"recorded it, the first plan after an import records the configured list in place, without running it.",
				Optional:    true,
				ElementType: types.StringType,
				PlanModifiers: []planmodifier.List{listplanmodifier.RequiresReplaceIf(
					func(ctx context.Context, req planmodifier.ListRequest, resp *listplanmodifier.RequiresReplaceIfFuncResponse) {
						resp.RequiresReplace = !knownOnlyByImport(ctx, req.StateValue.IsNull(), req.Private, &resp.Diagnostics)
					}, replaceUnlessImported, replaceUnlessImported)},
			},
			"state": schema.StringAttribute{
				MarkdownDescription: "Desired state: `running` (the default), `stopped` or `paused`, changed in place. " +
					"`stopped` needs a pool with `lifecycle.stop-start`, `paused` one with `lifecycle.pause-resume`.",
				Optional:   true,
				Computed:   true,
				Default:    stringdefault.StaticString(wantRunning),
				Validators: []validator.String{stringvalidator.OneOf(wantRunning, wantStopped, wantPaused)},
			},
			"pool": schema.StringAttribute{
				MarkdownDescription: "Pool the sandbox was placed on.",
				Computed:            true,
				PlanModifiers:       keep,
			},
			"region": schema.StringAttribute{
				MarkdownDescription: "Region of the pool the sandbox runs in.",
				Computed:            true,
				PlanModifiers:       keep,
			},
			"backend_ref": schema.StringAttribute{
				MarkdownDescription: "The backend's own ID of the instance.",
				Computed:            true,
				PlanModifiers:       keep,
			},
			"status": schema.StringAttribute{
				MarkdownDescription: "The daemon's state of the sandbox at the last refresh (`queued`, `provisioning`, " +
					"`running`, `stopped`, `paused`, ...).",
				Computed: true,
			},
			"timeouts": timeoutsAttribute(),
		},
	}
}
