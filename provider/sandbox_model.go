package provider

import (
	"context"
	"slices"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/different-ai/differently/client"
)

// toCreate builds the create request from a plan and the configuration's env_wo,
// which the plan cannot hold.
func (m *sandboxModel) toCreate(ctx context.Context, envWO types.Map, diags *diag.Diagnostics) client.SandboxCreate {
	body := client.SandboxCreate{
		Org:          strPtr(m.Org),
		Project:      strPtr(m.Project),
		Template:     strPtr(m.Template),
		Profile:      strPtr(m.Profile),
		FromSnapshot: strPtr(m.FromSnapshot),
	}
	if caps := stringsOf(ctx, m.Capabilities, diags); caps != nil {
		body.Capabilities = &caps
	}
	// The daemon records them, without running them, so that an import reads them back.
	if cmds := m.initCommands(ctx, diags); len(cmds) > 0 {
		body.InitCommands = &cmds
	}
	if env := createEnv(ctx, m.Env, envWO, diags); env != nil {
		body.Env = &env
	}
	if labels := mapOf(ctx, m.Labels, diags); labels != nil {
		body.Labels = &labels
	}
	switch {
	case !m.TTLSeconds.IsNull() && !m.TTLSeconds.IsUnknown():
		body.TtlSeconds = ptr(m.TTLSeconds.ValueInt64())
	case body.Profile == nil:
		// Terraform owns this sandbox's lifetime: left out means no expiry, said
		// explicitly, or the daemon would apply its default TTL and delete the sandbox
		// under the configuration. With a profile, the profile's TTL applies.
		body.TtlSeconds = ptr(int64(0))
	}
	if !m.Resources.IsNull() && !m.Resources.IsUnknown() {
		var res struct {
			CPU       types.Float64 `tfsdk:"cpu"`
			MemoryMiB types.Int64   `tfsdk:"memory_mib"`
			DiskGiB   types.Int64   `tfsdk:"disk_gib"`
		}
		diags.Append(m.Resources.As(ctx, &res, objectAsOptions)...)
		body.Resources = &client.Resources{CPU: res.CPU.ValueFloat64(), MemoryMiB: res.MemoryMiB.ValueInt64(), DiskGiB: res.DiskGiB.ValueInt64()}
	}
	if !m.Placement.IsNull() && !m.Placement.IsUnknown() {
		pl := m.placement(ctx, diags)
		body.Placement = &client.Placement{}
		if v := stringsOf(ctx, pl.AllowedPools, diags); v != nil {
			body.Placement.AllowedPools = &v
		}
		if v := stringsOf(ctx, pl.Regions, diags); v != nil {
			body.Placement.Regions = &v
		}
	}
	return body
}

type placementModel struct {
	AllowedPools types.List `tfsdk:"allowed_pools"`
	Regions      types.List `tfsdk:"regions"`
}

func (m *sandboxModel) placement(ctx context.Context, diags *diag.Diagnostics) placementModel {
	pl := placementModel{AllowedPools: types.ListNull(types.StringType), Regions: types.ListNull(types.StringType)}
	if !m.Placement.IsNull() && !m.Placement.IsUnknown() {
		diags.Append(m.Placement.As(ctx, &pl, objectAsOptions)...)
	}
	return pl
}

func (m *sandboxModel) initCommands(ctx context.Context, diags *diag.Diagnostics) []string {
	return stringsOf(ctx, m.InitCommands, diags)
}

// fromAPI copies what the daemon reports into the model. Attributes the daemon never
// returns (env, timeouts) keep their planned or prior values, as do init_commands
// when the daemon recorded none (a sandbox made before it recorded them), and the
// desired state is only updated from settled states: a sandbox still queued or
// provisioning is on its way to running.
func (m *sandboxModel) fromAPI(ctx context.Context, sb *client.Sandbox, diags *diag.Diagnostics) {
	m.ID = types.StringValue(sb.Id)
	m.Org = types.StringValue(sb.Org)
	m.Project = types.StringValue(sb.Project)
	m.Profile = optString(m.Profile, sb.Profile)
	// A sandbox made from a profile reports the configuration merged with the
	// profile: capabilities added, template, placement and TTL filled in where the
	// configuration left them out or empty. What the profile contributed is not a
	// difference, so an argument left out stays null, one set empty stays empty, and
	// the capabilities keep the configured set as long as the sandbox has every one
	// of them.
	fromProfile := deref(sb.Profile) != ""
	if !fromProfile || m.Template.ValueString() != "" {
		m.Template = optString(m.Template, sb.Template)
	}
	if !fromProfile || !capabilitiesCovered(ctx, m.Capabilities, sb.Capabilities, diags) {
		m.Capabilities = stringSet(m.Capabilities, sb.Capabilities)
	}
	m.Resources = sandboxResources(m.Resources, sb.Resources, fromProfile)
	m.Labels = stringMap(m.Labels, sb.Labels)
	switch ttl := deref(sb.TtlSeconds); {
	case fromProfile && m.TTLSeconds.IsNull():
		// Left out of the configuration: the profile's TTL, if any, applies.
	case ttl > 0:
		m.TTLSeconds = types.Int64Value(ttl)
	case !m.TTLSeconds.IsNull() && !m.TTLSeconds.IsUnknown() && m.TTLSeconds.ValueInt64() == 0:
		// 0 written in the configuration, absent from the API: the same thing.
	default:
		m.TTLSeconds = types.Int64Null()
	}
	m.Placement = placementValue(ctx, m.Placement, sb.Placement, fromProfile, diags)
	m.FromSnapshot = optString(m.FromSnapshot, sb.FromSnapshot)
	switch sb.State {
	case client.Running, client.Stopped, client.Paused:
		m.State = types.StringValue(string(sb.State))
	default:
		if m.State.IsNull() || m.State.IsUnknown() {
			m.State = types.StringValue(wantRunning)
		}
	}
	m.Pool = types.StringValue(deref(sb.Pool))
	m.Region = types.StringValue(deref(sb.Region))
	m.BackendRef = types.StringValue(deref(sb.BackendRef))
	m.Status = types.StringValue(string(sb.State))
	if m.Timeouts.IsUnknown() {
		m.Timeouts = types.ObjectNull(timeoutsTypes)
	}
	switch cmds := deref(sb.InitCommands); {
	case len(cmds) > 0:
		m.InitCommands = stringList(m.InitCommands, cmds)
	case m.InitCommands.IsUnknown():
		m.InitCommands = types.ListNull(types.StringType)
	}
	if m.Env.IsUnknown() {
		m.Env = types.MapNull(types.StringType)
	}
}

// capabilitiesCovered reports whether a sandbox made from a profile matches the
// configured capabilities: null (all of them came from the profile) or a set the
// sandbox's capabilities include (the profile added the rest).
func capabilitiesCovered(ctx context.Context, prior types.Set, actual []string, diags *diag.Diagnostics) bool {
	if prior.IsUnknown() {
		return false
	}
	for _, c := range stringsOf(ctx, prior, diags) {
		if !slices.Contains(actual, c) {
			return false
		}
	}
	return true
}

// sandboxResources is the resources the daemon reports, except that for a sandbox
// made from a profile a value the configuration (or the state) holds as 0 stays 0:
// the profile filled it in, field by field, and what it contributed is not a
// difference.
func sandboxResources(had types.Object, got client.Resources, fromProfile bool) types.Object {
	out := resourcesValue(got)
	if !fromProfile || had.IsNull() || had.IsUnknown() {
		return out
	}
	vals := out.Attributes()
	for name, v := range had.Attributes() {
		if isKnownZero(v) {
			vals[name] = v
		}
	}
	return types.ObjectValueMust(resourcesTypes, vals)
}

func isKnownZero(v attr.Value) bool {
	switch v := v.(type) {
	case types.Float64:
		return !v.IsNull() && !v.IsUnknown() && v.ValueFloat64() == 0
	case types.Int64:
		return !v.IsNull() && !v.IsUnknown() && v.ValueInt64() == 0
	}
	return false
}
