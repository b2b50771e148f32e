package provider

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/different-ai/differently/client"
)

// The API leaves empty strings, lists and maps out or sends them empty, while
// Terraform tells null from empty. The helpers below map "empty from the API" to
// whatever the prior value was (null or empty), so that a configuration that omits
// an attribute and one that sets it empty both plan clean after apply.

// optString maps an optional API string to a Terraform string: nil or "" is null
// unless the prior value was the empty string.
func optString(prior types.String, v *string) types.String {
	if v == nil || *v == "" {
		if !prior.IsNull() && !prior.IsUnknown() && prior.ValueString() == "" {
			return prior
		}
		return types.StringNull()
	}
	return types.StringValue(*v)
}

// strPtr is the API's optional string: nil for null, unknown or "".
func strPtr(v types.String) *string {
	if v.IsNull() || v.IsUnknown() || v.ValueString() == "" {
		return nil
	}
	s := v.ValueString()
	return &s
}

func ptr[T any](v T) *T { return &v }

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// stringSet maps API strings to a set; an empty list keeps a null prior null.
func stringSet(prior types.Set, items []string) types.Set {
	if len(items) == 0 && (prior.IsNull() || prior.IsUnknown()) {
		return types.SetNull(types.StringType)
	}
	vals := make([]attr.Value, len(items))
	for i, s := range items {
		vals[i] = types.StringValue(s)
	}
	return types.SetValueMust(types.StringType, vals)
}

// computedStringSet is stringSet for computed attributes, which are never null.
func computedStringSet(items []string) types.Set {
	vals := make([]attr.Value, len(items))
	for i, s := range items {
		vals[i] = types.StringValue(s)
	}
	return types.SetValueMust(types.StringType, vals)
}

// stringList maps API strings to a list; an empty list keeps a null prior null.
func stringList(prior types.List, items []string) types.List {
	if len(items) == 0 && (prior.IsNull() || prior.IsUnknown()) {
		return types.ListNull(types.StringType)
	}
	vals := make([]attr.Value, len(items))
	for i, s := range items {
		vals[i] = types.StringValue(s)
	}
	return types.ListValueMust(types.StringType, vals)
}

// stringMap maps API key/values to a map; an empty map keeps a null prior null.
func stringMap(prior types.Map, m map[string]string) types.Map {
	if len(m) == 0 && (prior.IsNull() || prior.IsUnknown()) {
		return types.MapNull(types.StringType)
	}
	vals := make(map[string]attr.Value, len(m))
	for k, v := range m {
		vals[k] = types.StringValue(v)
	}
	return types.MapValueMust(types.StringType, vals)
}

// elementsAs reads a list, set or map of strings from Terraform into Go; null and
// unknown give nil.
func stringsOf(ctx context.Context, v interface {
	IsNull() bool
	IsUnknown() bool
	ElementsAs(context.Context, any, bool) diag.Diagnostics
}, diags *diag.Diagnostics) []string {
	if v.IsNull() || v.IsUnknown() {
		return nil
	}
	var out []string
	diags.Append(v.ElementsAs(ctx, &out, false)...)
	return out
}

func mapOf(ctx context.Context, v types.Map, diags *diag.Diagnostics) map[string]string {
	if v.IsNull() || v.IsUnknown() {
		return nil
	}
	out := map[string]string{}
	diags.Append(v.ElementsAs(ctx, &out, false)...)
	return out
}

// configureClient is the shared Configure of resources and data sources: the
// provider hands over a *client.Client.
func configureClient(data any, diags *diag.Diagnostics) *client.Client {
	if data == nil { // the provider is not configured yet (validation, early plan)
		return nil
	}
	c, ok := data.(*client.Client)
	if !ok {
		diags.AddError("Unexpected provider data", fmt.Sprintf("expected *client.Client, got %T; this is a bug in the provider", data))
		return nil
	}
	return c
}

func resourceClient(req resource.ConfigureRequest, resp *resource.ConfigureResponse) *client.Client {
	return configureClient(req.ProviderData, &resp.Diagnostics)
}

func dataSourceClient(req datasource.ConfigureRequest, resp *datasource.ConfigureResponse) *client.Client {
	return configureClient(req.ProviderData, &resp.Diagnostics)
}

// apiError is a diagnostic detail for a failed call, with the API's code and details
// when the daemon sent them.
func apiError(err error) string {
	var e *client.APIError
	if errors.As(err, &e) && len(e.Details) > 0 {
		if d, jerr := json.Marshal(e.Details); jerr == nil {
			return fmt.Sprintf("%s\n\nDetails: %s", err, d)
		}
	}
	return err.Error()
}

// tfsdkGetter and tfsdkSetter are the halves of tfsdk.Plan and tfsdk.State that
// shared Create/Update code needs.
type tfsdkGetter interface {
	Get(ctx context.Context, target any) diag.Diagnostics
}

type tfsdkSetter interface {
	Set(ctx context.Context, val any) diag.Diagnostics
}
