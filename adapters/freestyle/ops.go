package freestyle

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/api"
)

// poweroffTimeout bounds the exec that powers the guest off. The exec may never
// answer (the guest goes down under it), so Stop does not wait on it longer.
const poweroffTimeout = 30 * time.Second

// Stop powers the guest off from inside, since Freestyle has no stop call, and polls
// until the VM reports stopped. The disk is kept.
func (a *Adapter) Stop(ctx context.Context, ref string) error {
	vm, err := a.get(ctx, ref)
	if err != nil {
		return err
	}
	switch vm.State {
	case "stopped":
		return nil
	case "starting":
		if _, err := a.settle(ctx, ref, "running", "starting"); err != nil {
			return err
		}
	case "running":
	default:
		return adapters.InvalidState("freestyle: cannot stop VM %s while it is %s", ref, vm.State)
	}
	pctx, cancel := context.WithTimeout(ctx, poweroffTimeout)
	body := execBody{Command: "poweroff", TimeoutMs: poweroffTimeout.Milliseconds()}
	err = a.c.JSON(pctx, http.MethodPost, vmPath(ref, "exec-await"), nil, body, nil)
	cancel()
	// The answer is expected to be lost with the guest; only a missing VM or the
	// caller giving up ends Stop here. The state read below decides.
	if api.IsCode(err, api.CodeNotFound) {
		return err
	}
	if ctx.Err() != nil {
		return adapters.Unavailable("freestyle: stop of %s: %v", ref, ctx.Err())
	}
	_, err = a.settle(ctx, ref, "stopped", "running")
	return err
}

// Start boots a stopped VM through /start and polls until it runs.
func (a *Adapter) Start(ctx context.Context, ref string) error {
	vm, err := a.get(ctx, ref)
	if err != nil {
		return err
	}
	switch vm.State {
	case "running":
		return nil
	case "stopped", "paused":
		if err := a.c.JSON(ctx, http.MethodPost, vmPath(ref, "start"), nil, struct{}{}, nil); err != nil {
			return err
		}
	case "starting":
	default:
		return adapters.InvalidState("freestyle: cannot start VM %s while it is %s", ref, vm.State)
	}
	_, err = a.settle(ctx, ref, "running", "starting", "stopped", "paused")
	return err
}

// Pause freezes the VM with its memory through /pause and polls until it is paused.
func (a *Adapter) Pause(ctx context.Context, ref string) error {
	vm, err := a.get(ctx, ref)
	if err != nil {
		return err
	}
	switch vm.State {
	case "paused":
		return nil
	case "running":
		if err := a.c.JSON(ctx, http.MethodPost, vmPath(ref, "pause"), nil, struct{}{}, nil); err != nil {
			return err
		}
	case "pausing":
	default:
		return adapters.InvalidState("freestyle: cannot pause VM %s while it is %s", ref, vm.State)
	}
	_, err = a.settle(ctx, ref, "paused", "pausing", "running")
	return err
}

// Resume wakes a paused VM. Freestyle resumes through /start, the call that also
// boots stopped VMs, so a stopped VM is refused here rather than cold-booted.
func (a *Adapter) Resume(ctx context.Context, ref string) error {
	vm, err := a.get(ctx, ref)
	if err != nil {
		return err
	}
	switch vm.State {
	case "running":
		return nil
	case "pausing":
		if _, err := a.settle(ctx, ref, "paused", "pausing"); err != nil {
			return err
		}
	case "paused":
	default:
		return adapters.InvalidState("freestyle: cannot resume VM %s while it is %s", ref, vm.State)
	}
	if err := a.c.JSON(ctx, http.MethodPost, vmPath(ref, "start"), nil, struct{}{}, nil); err != nil {
		return err
	}
	_, err = a.settle(ctx, ref, "running", "paused", "starting")
	return err
}

// Snapshot captures the VM through /snapshot. Freestyle snapshots always hold memory
// and disk, so the result is reported as a memory snapshot whichever kind was asked
// for; it restores a disk just as well.
func (a *Adapter) Snapshot(ctx context.Context, ref string, kind adapters.SnapshotKind) (adapters.Snapshot, error) {
	if err := kind.Validate(); err != nil {
		return adapters.Snapshot{}, err
	}
	if !validRef(ref) {
		return adapters.Snapshot{}, adapters.NotFound("freestyle: no VM %q", ref)
	}
	var out struct {
		SnapshotID string `json:"snapshotId"`
	}
	if err := a.c.JSON(ctx, http.MethodPost, vmPath(ref, "snapshot"), nil, struct{}{}, &out); err != nil {
		return adapters.Snapshot{}, err
	}
	if out.SnapshotID == "" {
		return adapters.Snapshot{}, adapters.Unavailable("freestyle: snapshot of %s answered no snapshotId", ref)
	}
	return adapters.Snapshot{Ref: out.SnapshotID, Kind: adapters.SnapshotMemory}, nil
}

// DeleteSnapshot removes a snapshot; a missing one is a success.
func (a *Adapter) DeleteSnapshot(ctx context.Context, snapshotRef string) error {
	if !validRef(snapshotRef) {
		return nil
	}
	err := a.c.JSON(ctx, http.MethodDelete, "/v5/snapshots/"+snapshotRef, nil, nil, nil)
	if api.IsCode(err, api.CodeNotFound) {
		return nil
	}
	return err
}

type tlsRule struct {
	ID     string `json:"id,omitempty"`
	Action string `json:"action"`
	Domain string `json:"domain"`
	Source struct {
		Public bool `json:"public"`
	} `json:"source"`
	Destination struct {
		VMID string `json:"vmId"`
		Port int    `json:"port"`
	} `json:"destination"`
}

// ExposePort routes https://<port>-<slug>.<domain> to the guest port with a public
// TLS rule. Anyone who has the URL can connect: Freestyle's rule has no
// authentication. A 409 means a rule for that hostname exists already: the URL is
// returned again only when that rule is this VM's and this port's, since a rule
// left behind by an earlier VM of the same slug would send the caller's traffic
// somewhere else.
func (a *Adapter) ExposePort(ctx context.Context, ref string, port int) (string, error) {
	if port < 1 || port > 65535 {
		return "", adapters.InvalidRequest("freestyle: port %d is not 1-65535", port)
	}
	vm, err := a.get(ctx, ref)
	if err != nil {
		return "", err
	}
	slug := vm.Slug
	if slug == "" {
		slug = Slug(vm.Metadata[MetaSandboxID])
	}
	rule := tlsRule{Action: "allow", Domain: fmt.Sprintf("%d-%s.%s", port, slug, a.cfg.Domain)}
	rule.Source.Public = true
	rule.Destination.VMID, rule.Destination.Port = vm.ID, port
	err = a.c.JSON(ctx, http.MethodPost, "/v5/tls", nil, rule, nil)
	if api.IsCode(err, api.CodeInvalidState) {
		rules, lerr := a.tlsRules(ctx, vm.ID)
		if lerr != nil {
			return "", lerr
		}
		if !slices.ContainsFunc(rules, func(r tlsRule) bool { return r.Domain == rule.Domain && r.Destination.Port == port }) {
			return "", adapters.InvalidState("freestyle: %s is routed by a rule that is not this VM's port %d", rule.Domain, port)
		}
		err = nil
	}
	if err != nil {
		return "", err
	}
	return "https://" + rule.Domain + "/", nil
}

// tlsRules lists the TLS rules that route to a VM.
func (a *Adapter) tlsRules(ctx context.Context, vmID string) ([]tlsRule, error) {
	var out struct {
		Rules []tlsRule `json:"rules"`
	}
	err := a.c.JSON(ctx, http.MethodGet, "/v5/tls", url.Values{"vmId": {vmID}}, nil, &out)
	if api.IsCode(err, api.CodeNotFound) {
		return nil, nil // no rules for a VM Freestyle does not know
	}
	// The filter is the provider's; checked again so that a rule of another VM is
	// never taken for this one's.
	return slices.DeleteFunc(out.Rules, func(r tlsRule) bool { return r.Destination.VMID != vmID }), err
}

// deleteTLSRules removes the public routes to a VM before the VM goes: the notes do
// not say that Freestyle removes them itself, and a route left behind would keep a
// hostname that names the sandbox pointing at whatever gets the VM's address next.
func (a *Adapter) deleteTLSRules(ctx context.Context, vmID string) error {
	rules, err := a.tlsRules(ctx, vmID)
	if err != nil {
		return err
	}
	for _, r := range rules {
		if r.ID == "" || !validRef(r.ID) {
			continue
		}
		err := a.c.JSON(ctx, http.MethodDelete, "/v5/tls/"+url.PathEscape(r.ID), nil, nil, nil)
		if err != nil && !api.IsCode(err, api.CodeNotFound) {
			return err
		}
	}
	return nil
}

// RenewTTL moves Freestyle's expiry with PATCH /v5/vms/{id} {ttlSeconds}. The notes
// do not say whether ttlSeconds counts from creation or from the call, so the value
// sent is the VM's age plus ttlSeconds: exact in the first reading, and later than
// needed (harmless: Differently deletes the sandbox at its own TTL) in the second.
// Zero sends null, removing the expiry.
func (a *Adapter) RenewTTL(ctx context.Context, ref string, ttlSeconds int64) error {
	if ttlSeconds < 0 {
		return adapters.InvalidRequest("freestyle: ttlSeconds must not be negative")
	}
	vm, err := a.get(ctx, ref)
	if err != nil {
		return err
	}
	body := map[string]any{"ttlSeconds": nil}
	if ttlSeconds > 0 {
		var age int64
		if created, err := time.Parse(time.RFC3339Nano, vm.CreatedAt); err == nil && time.Since(created) > 0 {
			age = int64(time.Since(created).Seconds()) + 1
		}
		body["ttlSeconds"] = age + ttlSeconds
	}
	return a.c.JSON(ctx, http.MethodPatch, vmPath(ref), nil, body, nil)
}
