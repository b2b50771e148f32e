package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/list"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-go/tftypes"

	"github.com/different-ai/differently/client"
)

// List resources (Terraform 1.14 or later) answer `terraform query`: each finds
// objects on the daemon, with the identity an import block needs and, when asked
// (include_resource), the whole resource as a read would record it, from which
// `terraform query -generate-config-out` writes configuration to import them.

// lister is what every list resource shares: the client, from the provider's
// configuration.
type lister struct{ c *client.Client }

func (l *lister) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	l.c = resourceClient(req, resp)
}

// result is one object found: its identity always, its state when the request
// includes resources. fill writes the state into a model whose attributes are all
// null (see nullModel) and returns it, for the resource's own fromAPI.
func result[M any](ctx context.Context, req list.ListRequest, name string, identity any, fill func(*M, *diag.Diagnostics)) list.ListResult {
	r := req.NewListResult(ctx)
	r.DisplayName = name
	r.Diagnostics.Append(r.Identity.Set(ctx, identity)...)
	if !req.IncludeResource {
		return r
	}
	var m M
	r.Diagnostics.Append(nullModel(ctx, r.Resource, &m)...)
	if r.Diagnostics.HasError() {
		return r
	}
	fill(&m, &r.Diagnostics)
	r.Diagnostics.Append(r.Resource.Set(ctx, &m)...)
	return r
}

// nullModel reads into target a state whose every attribute is null: the starting
// point a fresh read has, with each value typed as the schema says.
func nullModel(ctx context.Context, res *tfsdk.Resource, target any) diag.Diagnostics {
	typ, ok := res.Schema.Type().TerraformType(ctx).(tftypes.Object)
	if !ok {
		var diags diag.Diagnostics
		diags.AddError("Listing resources", "The resource's schema is not an object; this is a bug in the provider.")
		return diags
	}
	vals := make(map[string]tftypes.Value, len(typ.AttributeTypes))
	for name, t := range typ.AttributeTypes {
		vals[name] = tftypes.NewValue(t, nil)
	}
	res.Raw = tftypes.NewValue(typ, vals)
	return res.Get(ctx, target)
}

// failed is a list's answer when it cannot start or go on.
func failed(summary, detail string) list.ListResult {
	var diags diag.Diagnostics
	diags.AddError(summary, detail)
	return list.ListResult{Diagnostics: diags}
}

// within reports whether another result fits under the request's limit (0: none).
func within(req list.ListRequest, sent int64) bool {
	return req.Limit <= 0 || sent < req.Limit
}

// unconfigured is the answer of a list whose provider has no client: Terraform
// configures the provider before it lists, so this is a bug, said rather than a panic.
func unconfigured(summary string) diag.Diagnostics {
	var diags diag.Diagnostics
	diags.AddError(summary, "The provider was not configured before the list ran; this is a bug in the provider.")
	return diags
}

// pushAll answers a list whose API call returns every object at once (pools,
// projects): fetch reads them, keep filters, and each kept one is pushed as a result
// until the request's limit or Terraform says stop.
func pushAll[T, M any](ctx context.Context, req list.ListRequest, push func(list.ListResult) bool, what string,
	fetch func() ([]T, error), keep func(*T) bool, describe func(*T) (name string, identity any),
	fill func(*M, *T, *diag.Diagnostics)) {
	items, err := fetch()
	if err != nil {
		push(failed("Listing "+what, apiError(err)))
		return
	}
	var sent int64
	for i := range items {
		it := &items[i]
		if !keep(it) {
			continue
		}
		if !within(req, sent) {
			return
		}
		name, identity := describe(it)
		if !push(result(ctx, req, name, identity, func(m *M, diags *diag.Diagnostics) { fill(m, it, diags) })) {
			return
		}
		sent++
	}
}
