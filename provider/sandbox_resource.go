package provider

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/identityschema"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/different-ai/differently/client"
)

var (
	_ resource.ResourceWithConfigure   = (*sandboxResource)(nil)
	_ resource.ResourceWithImportState = (*sandboxResource)(nil)
)

func newSandboxResource() resource.Resource { return &sandboxResource{} }

type sandboxResource struct{ c *client.Client }

func (r *sandboxResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_sandbox"
}

func (r *sandboxResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	r.c = resourceClient(req, resp)
}

func (r *sandboxResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var m sandboxModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &m)...)
	wo := writeOnlyEnv(ctx, req.Config, &resp.Diagnostics)
	body := m.toCreate(ctx, wo, &resp.Diagnostics)
	commands := m.initCommands(ctx, &resp.Diagnostics)
	timeout := timeoutOf(ctx, m.Timeouts, "create", defaultCreateTimeout, &resp.Diagnostics)
	if resp.Diagnostics.HasError() {
		return
	}
	want := m.State.ValueString()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	woValues := map[string]string{}
	if !wo.IsNull() && !wo.IsUnknown() {
		resp.Diagnostics.Append(wo.ElementsAs(ctx, &woValues, false)...)
	}
	redact := envRedactor(deref(body.Env), woValues)

	// A fresh key per apply makes the client's retries of this POST safe without
	// tying two applies of the same configuration to one sandbox.
	sb, err := r.c.CreateSandbox(ctx, body, newIdempotencyKey())
	if err != nil {
		resp.Diagnostics.AddError("Creating sandbox", redact.String(apiError(err)))
		return
	}
	// From here on the sandbox exists: every failure saves its ID to the state
	// first, so Terraform marks it tainted and replaces it rather than orphaning it.
	save := func(sb *client.Sandbox) {
		m.fromAPI(ctx, sb, &resp.Diagnostics)
		resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
		setIdentity(ctx, resp.Identity, idIdentity{ID: m.ID}, &resp.Diagnostics)
	}
	save(sb)
	id := sb.Id

	last := sb
	if sb, err = r.c.WaitForState(ctx, id, client.Running); err != nil {
		if sb != nil {
			save(sb)
			last = sb
		}
		if stillStarting(err, last) && len(commands) == 0 && want == wantRunning {
			// Nothing is left to do but wait, and the sandbox may yet come up:
			// replacing it would throw away the start the timeout cut short.
			resp.Diagnostics.AddWarning("Sandbox "+id+" is still starting",
				fmt.Sprintf("The create timeout (%s) passed while the sandbox was %s. It is kept in the state and goes on "+
					"starting; the next plan reads where it got, and replaces it if it failed. Raise timeouts.create "+
					"if the pool is slow.", timeout, last.State))
			return
		}
		resp.Diagnostics.AddError("Sandbox "+id+" did not start", redact.String(waitError(err, timeout, "create")))
		return
	}
	save(sb)
	for i, cmd := range commands {
		// timeouts.create bounds the commands too, not the adapter's default.
		res, err := r.c.ExecSandbox(ctx, id, client.ExecRequest{Command: cmd, TimeoutSeconds: execTimeout(ctx)})
		if err != nil {
			resp.Diagnostics.AddError(fmt.Sprintf("init_commands[%d] could not run in sandbox %s", i, id),
				redact.String(waitError(err, timeout, "create")))
			return
		}
		if res.ExitCode != 0 || res.TimedOut {
			resp.Diagnostics.AddAttributeError(path.Root("init_commands").AtListIndex(i),
				fmt.Sprintf("init_commands[%d] failed in sandbox %s", i, id), redact.String(execFailure(cmd, res)))
			return
		}
	}
	if sb, err = transition(ctx, r.c, sb, want); err != nil {
		if sb != nil {
			save(sb)
		}
		resp.Diagnostics.AddError(fmt.Sprintf("Sandbox %s could not be %s", id, want), redact.String(waitError(err, timeout, "create")))
		return
	}
	save(sb)
}

func (r *sandboxResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var m sandboxModel
	resp.Diagnostics.Append(req.State.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	// Set before any early return: Terraform before 1.12 keeps no identity, and the
	// framework refuses a read that leaves it empty, a removal from the state included.
	setIdentity(ctx, resp.Identity, idIdentity{ID: m.ID}, &resp.Diagnostics)
	id := m.ID.ValueString()
	sb, err := r.c.GetSandbox(ctx, id)
	if client.IsNotFound(err) {
		resp.Diagnostics.AddWarning("Sandbox "+id+" is gone",
			"The sandbox no longer exists on the daemon; it is removed from the state and the next plan creates it again.")
		resp.State.RemoveResource(ctx)
		return
	}
	if err != nil {
		resp.Diagnostics.AddError("Reading sandbox "+id, apiError(err))
		return
	}
	switch sb.State {
	case client.Terminating, client.Terminated, client.Failed:
		reason := ""
		if r := deref(sb.Reason); r != "" {
			reason = " (" + r + ")"
		}
		resp.Diagnostics.AddWarning(fmt.Sprintf("Sandbox %s is %s", id, sb.State),
			fmt.Sprintf("The sandbox was deleted, expired, failed or lost outside Terraform%s; it is removed from the "+
				"state and the next plan creates it again.", reason))
		resp.State.RemoveResource(ctx)
		return
	}
	m.fromAPI(ctx, sb, &resp.Diagnostics)
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
	setIdentity(ctx, resp.Identity, idIdentity{ID: m.ID}, &resp.Diagnostics)
	advanceImport(ctx, sb, resp.Private, &resp.Diagnostics)
}

func (r *sandboxResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var plan, prior sandboxModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(req.State.Get(ctx, &prior)...)
	if resp.Diagnostics.HasError() {
		return
	}
	id := prior.ID.ValueString()
	var patch client.SandboxPatch
	var patching bool
	if !plan.Labels.Equal(prior.Labels) {
		labels := mapOf(ctx, plan.Labels, &resp.Diagnostics)
		if labels == nil {
			labels = map[string]string{} // the patch replaces every label
		}
		patch.Labels, patching = &labels, true
	}
	if !plan.TTLSeconds.Equal(prior.TTLSeconds) && !r.importedWithTTL(ctx, id, prior.TTLSeconds, plan.TTLSeconds, req.Private, &resp.Diagnostics) {
		patch.TtlSeconds, patching = ptr(plan.TTLSeconds.ValueInt64()), true // null is 0: no expiry
	}
	if resp.Diagnostics.HasError() {
		return
	}
	if patching {
		if _, err := r.c.PatchSandbox(ctx, id, patch); err != nil {
			resp.Diagnostics.AddError("Updating sandbox "+id, apiError(err))
			return
		}
	}
	timeout := timeoutOf(ctx, plan.Timeouts, "update", defaultCreateTimeout, &resp.Diagnostics)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// The actual state, not the one in the prior state, decides the transition:
	// the plan may come from a refresh taken a while ago.
	sb, err := r.c.GetSandbox(ctx, id)
	if err != nil {
		resp.Diagnostics.AddError("Updating sandbox "+id+": reading its current state", apiError(err))
		return
	}
	want := plan.State.ValueString()
	if sb, err = transition(ctx, r.c, sb, want); err != nil {
		resp.Diagnostics.AddError(fmt.Sprintf("Sandbox %s could not be %s", id, want), waitError(err, timeout, "update"))
		return
	}
	plan.fromAPI(ctx, sb, &resp.Diagnostics)
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
	setIdentity(ctx, resp.Identity, idIdentity{ID: plan.ID}, &resp.Diagnostics)
	// The first apply after an import has recorded env and init_commands (or their
	// absence): from now on a change to them replaces the sandbox.
	resp.Diagnostics.Append(resp.Private.SetKey(ctx, importedKey, nil)...)
}

// importedWithTTL reports whether the first update after an import finds the
// configured TTL already on the sandbox, whose state could not hold it (a TTL the
// profile set, or 0): it is then recorded without a PATCH, which would restart the
// sandbox's lifetime from now.
func (r *sandboxResource) importedWithTTL(ctx context.Context, id string, prior, plan types.Int64, private privateGetter, diags *diag.Diagnostics) bool {
	if !prior.IsNull() || plan.IsNull() || plan.IsUnknown() || !knownOnlyByImport(ctx, true, private, diags) {
		return false
	}
	sb, err := r.c.GetSandbox(ctx, id)
	if err != nil {
		diags.AddError("Updating sandbox "+id+": reading its TTL", apiError(err))
		return false
	}
	return deref(sb.TtlSeconds) == plan.ValueInt64()
}

// Delete terminates the sandbox and waits until it is terminated, so that a pool
// destroyed in the same apply is empty by then.
func (r *sandboxResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var m sandboxModel
	resp.Diagnostics.Append(req.State.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	id := m.ID.ValueString()
	timeout := timeoutOf(ctx, m.Timeouts, "delete", defaultDeleteTimeout, &resp.Diagnostics)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if _, err := r.c.DeleteSandbox(ctx, id); err != nil {
		if !client.IsNotFound(err) {
			resp.Diagnostics.AddError("Deleting sandbox "+id, apiError(err))
		}
		return
	}
	sb, err := r.c.WaitForState(ctx, id, client.Terminated)
	switch {
	case err == nil, client.IsNotFound(err):
	case errors.Is(err, client.ErrTerminalState) && sb != nil && sb.State == client.Failed:
		// A failed sandbox has no instance left to delete: it is as gone as it gets.
	default:
		resp.Diagnostics.AddError("Sandbox "+id+" was not terminated", waitError(err, timeout, "delete"))
	}
}

// ImportState takes the sandbox ID. Arguments the daemon never returns (env,
// timeouts) stay unset after an import; init_commands are read back.
func (r *sandboxResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	importByIDOrIdentity(ctx, "id", req, resp)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("timeouts"), types.ObjectNull(timeoutsTypes))...)
	resp.Diagnostics.Append(resp.Private.SetKey(ctx, importedKey, []byte(`{"reads":0}`))...)
}

func newIdempotencyKey() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // crypto/rand.Read never fails on supported platforms
	return "terraform-" + hex.EncodeToString(b)
}

func (r *sandboxResource) IdentitySchema(_ context.Context, _ resource.IdentitySchemaRequest, resp *resource.IdentitySchemaResponse) {
	resp.IdentitySchema = identityschema.Schema{Attributes: map[string]identityschema.Attribute{
		"id": identityAttribute("The sandbox's ID."),
	}}
}
