package provider

import (
	"context"
	"fmt"

	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/list"
	"github.com/hashicorp/terraform-plugin-framework/list/schema"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/different-ai/differently/client"
)

var _ list.ListResourceWithConfigure = (*snapshotList)(nil)

func newSnapshotList() list.ListResource { return &snapshotList{} }

// snapshotList finds snapshots for `terraform query`.
type snapshotList struct{ lister }

type snapshotListConfig struct {
	SandboxID types.String `tfsdk:"sandbox_id"`
	Project   types.String `tfsdk:"project"`
}

func (l *snapshotList) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_snapshot"
}

func (l *snapshotList) ListResourceConfigSchema(_ context.Context, _ list.ListResourceSchemaRequest, resp *list.ListResourceSchemaResponse) {
	resp.Schema = schema.Schema{
		Description: "Finds snapshots, for `terraform query` (Terraform 1.14 or later) and the import blocks it generates: " +
			"those of one sandbox, or of every sandbox the token may see (terminated ones included, whose snapshots " +
			"stay until deleted), oldest first, a page of the daemon's at a time.",
		Attributes: map[string]schema.Attribute{
			"sandbox_id": schema.StringAttribute{
				Optional:    true,
				Description: "Only this sandbox's snapshots.",
				Validators: []validator.String{
					stringvalidator.LengthAtLeast(1),
					stringvalidator.ConflictsWith(path.MatchRoot("project")),
				},
			},
			"project": schema.StringAttribute{
				Optional:    true,
				Description: "Only snapshots of this project's sandboxes, as `org/name`, or a project name in any organisation. Admin tokens only.",
				Validators:  []validator.String{stringvalidator.LengthAtLeast(1)},
			},
		},
	}
}

func (l *snapshotList) List(ctx context.Context, req list.ListRequest, stream *list.ListResultsStream) {
	var cfg snapshotListConfig
	if diags := req.Config.Get(ctx, &cfg); diags.HasError() {
		stream.Results = list.ListResultsStreamDiagnostics(diags)
		return
	}
	if l.c == nil {
		stream.Results = list.ListResultsStreamDiagnostics(unconfigured("Listing snapshots"))
		return
	}
	stream.Results = func(push func(list.ListResult) bool) {
		var sent int64
		params := client.ListAllSnapshotsParams{Sandbox: strPtr(cfg.SandboxID), Project: strPtr(cfg.Project)}
		for {
			page, err := l.c.ListAllSnapshots(ctx, &params)
			if err != nil {
				push(failed("Listing snapshots", apiError(err)))
				return
			}
			for i := range page.Items {
				if !within(req, sent) {
					return
				}
				s := &page.Items[i]
				name := fmt.Sprintf("%s (%s of sandbox %s, %d bytes)", s.Id, s.Kind, s.SandboxId, s.SizeBytes)
				r := result(ctx, req, name, idIdentity{ID: types.StringValue(s.Id)},
					func(m *snapshotModel, _ *diag.Diagnostics) { m.fromAPI(s) })
				if !push(r) {
					return
				}
				sent++
			}
			if deref(page.NextCursor) == "" {
				return
			}
			params.Cursor = page.NextCursor
		}
	}
}
