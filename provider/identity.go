package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/identityschema"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

// Resource identities (Terraform 1.12 or later) name a resource on the daemon the way
// its import ID does, as attributes: import blocks may give them instead of an ID, and
// `terraform query` returns them for each object it finds, so that the import blocks
// it generates need nothing else.

// idIdentity is the identity of a sandbox or a snapshot: its ID.
type idIdentity struct {
	ID types.String `tfsdk:"id"`
}

// nameIdentity is the identity of a pool: its name.
type nameIdentity struct {
	Name types.String `tfsdk:"name"`
}

// projectIdentity is the identity of a project: its organization and name.
type projectIdentity struct {
	Org  types.String `tfsdk:"org"`
	Name types.String `tfsdk:"name"`
}

func identityAttribute(what string) identityschema.StringAttribute {
	return identityschema.StringAttribute{RequiredForImport: true, Description: what}
}

// setIdentity records a resource's identity. Terraform before 1.12 keeps none, and
// then passes no place for it.
func setIdentity(ctx context.Context, to *tfsdk.ResourceIdentity, v any, diags *diag.Diagnostics) {
	if to == nil {
		return
	}
	diags.Append(to.Set(ctx, v)...)
}

// importByIDOrIdentity copies a one-attribute import, by ID or by identity, into the
// state attribute at attr.
func importByIDOrIdentity(ctx context.Context, attr string, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	resource.ImportStatePassthroughWithIdentity(ctx, path.Root(attr), path.Root(attr), req, resp)
}

var (
	_ resource.ResourceWithIdentity = (*sandboxResource)(nil)
	_ resource.ResourceWithIdentity = (*poolResource)(nil)
	_ resource.ResourceWithIdentity = (*projectResource)(nil)
	_ resource.ResourceWithIdentity = (*snapshotResource)(nil)
)
