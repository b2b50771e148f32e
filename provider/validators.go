package provider

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types/basetypes"

	"github.com/different-ai/differently/api"
)

// Plan-time checks come from terraform-plugin-framework-validators, with the bounds
// the daemon enforces (api/limits.go, api/names.go). Two rules have no equivalent
// there and are written here: a Go duration, and a pool's credentials variable,
// which the daemon checks with api.CheckCredentialsEnv (a name, none of the
// daemon's own prefixes).

var objectAsOptions = basetypes.ObjectAsOptions{UnhandledNullAsEmpty: true, UnhandledUnknownAsEmpty: true}

// nameValidators check a pool or profile name at plan time with the pattern the
// daemon applies at apply time (api.ValidName).
func nameValidators() []validator.String {
	return []validator.String{stringvalidator.RegexMatches(api.NamePattern,
		"must be 1 to 63 lowercase letters, digits and dashes, starting and ending with a letter or digit")}
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
