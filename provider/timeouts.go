package provider

import (
	"context"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

// The `timeouts = { create = "30m", update = "30m", delete = "10m" }` attribute, written here because
// terraform-plugin-framework-timeouts is not a dependency of the module. It is a
// nested attribute rather than the block that library offers, as the issue asks for
// nested attributes throughout.

const (
	defaultCreateTimeout = 20 * time.Minute
	defaultDeleteTimeout = 10 * time.Minute
)

var timeoutsTypes = map[string]attr.Type{"create": types.StringType, "update": types.StringType, "delete": types.StringType}

func timeoutsAttribute() schema.SingleNestedAttribute {
	return schema.SingleNestedAttribute{
		MarkdownDescription: "How long to wait for operations, as Go durations such as `\"30s\"` or `\"10m\"`.",
		Optional:            true,
		Attributes: map[string]schema.Attribute{
			"create": schema.StringAttribute{
				MarkdownDescription: "Longest wait for the sandbox to run and its `init_commands` to finish (default `20m`). " +
					"When it passes, the sandbox's ID is kept in the state (tainted), so nothing is orphaned.",
				Optional:   true,
				Validators: []validator.String{durationValidator{}},
			},
			"update": schema.StringAttribute{
				MarkdownDescription: "Longest wait for an update to bring the sandbox to its configured `state` " +
					"(default: `create`'s value, else `20m`). When it passes the sandbox stays in the state as it was.",
				Optional:   true,
				Validators: []validator.String{durationValidator{}},
			},
			"delete": schema.StringAttribute{
				MarkdownDescription: "Longest wait for the sandbox to be terminated (default `10m`). When it passes the " +
					"destroy fails, the daemon goes on terminating the sandbox, and the next refresh removes it from the state.",
				Optional:   true,
				Validators: []validator.String{durationValidator{}},
			},
		},
	}
}

// timeoutOf reads one of the timeouts, falling back to def when unset. An unset
// update timeout is the create timeout, which bounded updates before update was one.
func timeoutOf(ctx context.Context, obj types.Object, name string, def time.Duration, diags *diag.Diagnostics) time.Duration {
	if obj.IsNull() || obj.IsUnknown() {
		return def
	}
	var t struct {
		Create types.String `tfsdk:"create"`
		Update types.String `tfsdk:"update"`
		Delete types.String `tfsdk:"delete"`
	}
	diags.Append(obj.As(ctx, &t, objectAsOptions)...)
	parse := func(v types.String) (time.Duration, bool) {
		if v.IsNull() || v.IsUnknown() {
			return 0, false
		}
		d, err := time.ParseDuration(v.ValueString())
		return d, err == nil && d > 0
	}
	switch name {
	case "delete":
		if d, ok := parse(t.Delete); ok {
			return d
		}
	case "update":
		if d, ok := parse(t.Update); ok {
			return d
		}
		fallthrough
	default:
		if d, ok := parse(t.Create); ok {
			return d
		}
	}
	return def
}
