package provider

import (
	"context"
	"slices"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/different-ai/differently/adapters"
)

var _ resource.ResourceWithValidateConfig = (*sandboxResource)(nil)

// ValidateConfig refuses a name that env and env_wo both set, as early as the names
// are known: whichever value won, one of them would silently not reach the sandbox.
func (r *sandboxResource) ValidateConfig(ctx context.Context, req resource.ValidateConfigRequest, resp *resource.ValidateConfigResponse) {
	var env, wo types.Map
	resp.Diagnostics.Append(req.Config.GetAttribute(ctx, path.Root("env"), &env)...)
	resp.Diagnostics.Append(req.Config.GetAttribute(ctx, path.Root("env_wo"), &wo)...)
	refuseEnvInBoth(env, wo, &resp.Diagnostics)
}

// writeOnlyEnv reads env_wo. Terraform passes a write-only argument in the
// configuration alone (the plan and the state hold null), and only the create
// reads it: the daemon takes a sandbox's environment once.
func writeOnlyEnv(ctx context.Context, config tfsdk.Config, diags *diag.Diagnostics) types.Map {
	var wo types.Map
	diags.Append(config.GetAttribute(ctx, path.Root("env_wo"), &wo)...)
	return wo
}

// createEnv is a new sandbox's environment: env and env_wo together, nil when both
// are empty.
func createEnv(ctx context.Context, env, wo types.Map, diags *diag.Diagnostics) map[string]string {
	// ValidateConfig has refused this already unless a map was unknown then.
	if refuseEnvInBoth(env, wo, diags) {
		return nil
	}
	out := mapOf(ctx, env, diags)
	for k, v := range mapOf(ctx, wo, diags) {
		if out == nil {
			out = map[string]string{}
		}
		out[k] = v
	}
	return out
}

// refuseEnvInBoth adds an error for each name env and env_wo both set, and reports
// whether there was one. Maps not known yet set no names. The diagnostics name the
// variables, never their values.
func refuseEnvInBoth(env, wo types.Map, diags *diag.Diagnostics) bool {
	if env.IsNull() || env.IsUnknown() || wo.IsNull() || wo.IsUnknown() {
		return false
	}
	var both []string
	for name := range wo.Elements() {
		if _, ok := env.Elements()[name]; ok {
			both = append(both, name)
		}
	}
	slices.Sort(both)
	for _, name := range both {
		diags.AddAttributeError(path.Root("env_wo").AtMapKey(name), "Environment variable "+name+" is set twice",
			name+" is in both env and env_wo. Set it in one of them: env_wo for a secret, which Terraform then "+
				"keeps out of the plan and the state.")
	}
	return len(both) > 0
}

// minRedactedEnv is the shortest env value hidden in diagnostics. Shorter ones
// ("1", "true", "prod") are settings rather than secrets, and hiding them mangles
// every message with those letters or digits in it ("gave up after [redacted]
// attempts"); secrets belong in env_wo, whose values are hidden whatever their
// length.
const minRedactedEnv = 6

// envRedactor hides the values of a sandbox's environment in the text of a
// diagnostic: a failed command's words and output, or a daemon's or a backend's
// message, may quote them. env is the whole environment sent, wo the part of it
// from env_wo.
func envRedactor(env, wo map[string]string) *adapters.Redactor {
	redact := adapters.NewRedactor()
	for k, v := range env {
		if _, secret := wo[k]; secret || len(v) >= minRedactedEnv {
			redact.Add(v)
		}
	}
	for _, v := range wo {
		redact.Add(v)
	}
	return redact
}
