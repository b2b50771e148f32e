package provider

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types/basetypes"

	"github.com/different-ai/differently/api"
)

// The few validators the schemas need, written here because
// terraform-plugin-framework-validators is not a dependency of the module.

var objectAsOptions = basetypes.ObjectAsOptions{UnhandledNullAsEmpty: true, UnhandledUnknownAsEmpty: true}

type oneOfValidator []string

func oneOf(vals ...string) validator.String { return oneOfValidator(vals) }

func (v oneOfValidator) Description(context.Context) string {
	return "value must be one of: " + strings.Join(v, ", ")
}

func (v oneOfValidator) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }

func (v oneOfValidator) ValidateString(_ context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	if !slices.Contains(v, req.ConfigValue.ValueString()) {
		resp.Diagnostics.AddAttributeError(req.Path, "Invalid value",
			fmt.Sprintf("%q is not one of %s.", req.ConfigValue.ValueString(), strings.Join(v, ", ")))
	}
}

type atLeastValidator int64

func atLeast(n int64) validator.Int64 { return atLeastValidator(n) }

func (v atLeastValidator) Description(context.Context) string {
	return fmt.Sprintf("value must be at least %d", int64(v))
}

func (v atLeastValidator) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }

func (v atLeastValidator) ValidateInt64(_ context.Context, req validator.Int64Request, resp *validator.Int64Response) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	if req.ConfigValue.ValueInt64() < int64(v) {
		resp.Diagnostics.AddAttributeError(req.Path, "Invalid value",
			fmt.Sprintf("%d is less than %d.", req.ConfigValue.ValueInt64(), int64(v)))
	}
}

type durationValidator struct{}

func (durationValidator) Description(context.Context) string {
	return `value must be a positive duration such as "30s", "10m" or "1h"`
}

func (v durationValidator) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }

func (durationValidator) ValidateString(_ context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	d, err := time.ParseDuration(req.ConfigValue.ValueString())
	if err != nil || d <= 0 {
		resp.Diagnostics.AddAttributeError(req.Path, "Invalid duration",
			fmt.Sprintf("%q is not a positive duration such as \"30s\", \"10m\" or \"1h\".", req.ConfigValue.ValueString()))
	}
}

// nameValidator checks a pool or profile name at plan time with the rule the daemon
// applies at apply time (api.ValidName).
type nameValidator struct{}

func (nameValidator) Description(context.Context) string {
	return "value must be 1 to 63 lowercase letters, digits and dashes, starting and ending with a letter or digit"
}

func (v nameValidator) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }

func (nameValidator) ValidateString(_ context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	if !api.ValidName(req.ConfigValue.ValueString()) {
		resp.Diagnostics.AddAttributeError(req.Path, "Invalid name", fmt.Sprintf("%q is not 1 to 63 lowercase "+
			"letters, digits and dashes starting and ending with a letter or digit.", req.ConfigValue.ValueString()))
	}
}

// credentialsEnvValidator checks a pool's credentials_env with the daemon's rule
// (api.CheckCredentialsEnv): a variable name, none of the daemon's own.
type credentialsEnvValidator struct{}

func (credentialsEnvValidator) Description(context.Context) string {
	return "value must be an environment variable name, not one of the daemon's own (DIFFERENTLY_*, PG*)"
}

func (v credentialsEnvValidator) MarkdownDescription(ctx context.Context) string {
	return v.Description(ctx)
}

func (credentialsEnvValidator) ValidateString(_ context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	if err := api.CheckCredentialsEnv(req.ConfigValue.ValueString()); err != nil {
		resp.Diagnostics.AddAttributeError(req.Path, "Invalid credentials variable", api.AsError(err).Message+".")
	}
}

// nonNegativeFloat refuses a number below zero.
type nonNegativeFloat struct{}

func (nonNegativeFloat) Description(context.Context) string { return "value must not be negative" }

func (v nonNegativeFloat) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }

func (nonNegativeFloat) ValidateFloat64(_ context.Context, req validator.Float64Request, resp *validator.Float64Response) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	if f := req.ConfigValue.ValueFloat64(); f < 0 || math.IsNaN(f) || math.IsInf(f, 0) {
		resp.Diagnostics.AddAttributeError(req.Path, "Invalid value", fmt.Sprintf("%v is not a finite number of 0 or more.", f))
	}
}
