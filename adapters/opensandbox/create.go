package opensandbox

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"time"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/adapters/httpx"
	"github.com/different-ai/differently/api"
)

// minTimeoutSeconds is the shortest timeout OpenSandbox accepts.
const minTimeoutSeconds = 60

// diskResource is the resourceLimits key that carries diskGiB. The lifecycle API's
// resourceLimits is an open map of Kubernetes-style resource names; OpenSandbox's
// Kubernetes runtime hands every key to the sandbox's pod as its request and limit,
// so this one bounds the pod's local disk (its writable layer, logs and emptyDir
// volumes), which the kubelet enforces by evicting a pod that goes over.
const diskResource = "ephemeral-storage"

// sendsDisk reports whether diskGiB goes into the create request. OpenSandbox's
// Docker runtime reads cpu, memory and gpu only and would ignore the key, so a pool
// declared runtime: docker does not send it and says so in Info; a pool whose
// runtime is not declared sends it, for the runtime to apply where it can.
func (a *Adapter) sendsDisk() bool { return a.cfg.Runtime != "docker" }

// keepAlive is the entrypoint of image sandboxes: execd is injected beside it, and
// the container has to stay up until it is deleted.
var keepAlive = []string{"tail", "-f", "/dev/null"}

type imageSpec struct {
	URI string `json:"uri"`
}

type networkRule struct {
	Action string `json:"action"`
	Target string `json:"target"`
}

type networkPolicy struct {
	DefaultAction string        `json:"defaultAction"`
	Egress        []networkRule `json:"egress"`
}

type createRequest struct {
	Image          *imageSpec        `json:"image,omitempty"`
	SnapshotID     string            `json:"snapshotId,omitempty"`
	Timeout        *int64            `json:"timeout,omitempty"`
	ResourceLimits map[string]string `json:"resourceLimits"`
	Env            map[string]string `json:"env,omitempty"`
	Metadata       map[string]string `json:"metadata"`
	Entrypoint     []string          `json:"entrypoint,omitempty"`
	NetworkPolicy  *networkPolicy    `json:"networkPolicy,omitempty"`
}

type snapshotStatus struct {
	State   string `json:"state"`
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
}

type snapshotWire struct {
	ID        string         `json:"id"`
	SandboxID string         `json:"sandboxId"`
	Status    snapshotStatus `json:"status"`
}

// Create returns the sandbox stamped with req.ID, or creates it, then waits until it
// runs. The wait is bounded by ctx alone: the scheduler's provision timeout decides
// how long a sandbox may take.
func (a *Adapter) Create(ctx context.Context, req adapters.CreateRequest) (adapters.Instance, error) {
	if err := req.Validate(); err != nil {
		return adapters.Instance{}, err
	}
	if !metadataValue.MatchString(req.ID) || !metadataValue.MatchString(req.Installation) {
		return adapters.Instance{}, adapters.InvalidRequest("opensandbox: sandbox and installation IDs must be usable as metadata values")
	}
	body, err := a.createBody(ctx, req)
	if err != nil {
		return adapters.Instance{}, err
	}
	unlock := a.locks.lock(req.ID)
	defer unlock()

	existing, err := a.listByMetadata(ctx, MetaSandboxID, req.ID)
	if err != nil {
		return adapters.Instance{}, err
	}
	for _, sb := range existing {
		if sb.Status.State == "Failed" {
			// A failed leftover would answer sandbox_failed forever; replacing it lets
			// the scheduler's retry mean something.
			if err := a.Delete(ctx, sb.ID); err != nil {
				return adapters.Instance{}, err
			}
			continue
		}
		return a.waitRunning(ctx, sb.ID)
	}

	var created sandbox
	if err := a.api.JSON(ctx, http.MethodPost, "/sandboxes", nil, body, &created); err != nil {
		if body.SnapshotID != "" && api.IsCode(err, api.CodeNotFound) {
			return adapters.Instance{}, adapters.InvalidRequest("opensandbox: snapshot %q does not exist", body.SnapshotID)
		}
		return adapters.Instance{}, err
	}
	if created.ID == "" {
		return adapters.Instance{}, adapters.Unavailable("opensandbox: create answered without a sandbox id")
	}
	return a.waitRunning(ctx, created.ID)
}

// createBody builds the create request: image or snapshot, resources, env, timeout,
// egress policy and metadata.
func (a *Adapter) createBody(ctx context.Context, req adapters.CreateRequest) (createRequest, error) {
	body := createRequest{
		ResourceLimits: map[string]string{},
		Env:            req.Env,
		Metadata:       map[string]string{},
	}
	for k, v := range req.Labels {
		if k != adapters.LabelSandboxID && k != adapters.LabelInstallation && fitsMetadata(k, v) {
			body.Metadata[k] = v
		}
	}
	body.Metadata[MetaSandboxID] = req.ID
	body.Metadata[MetaInstallation] = req.Installation

	if req.FromSnapshot != "" {
		if err := a.checkSnapshot(ctx, req.FromSnapshot); err != nil {
			return body, err
		}
		body.SnapshotID = req.FromSnapshot
	} else {
		image, err := a.image(req.Template)
		if err != nil {
			return body, err
		}
		body.Image, body.Entrypoint = &imageSpec{URI: image}, keepAlive
	}
	if r := req.Resources; r.CPU > 0 {
		body.ResourceLimits["cpu"] = fmt.Sprintf("%dm", int64(math.Ceil(r.CPU*1000)))
	}
	if r := req.Resources; r.MemoryMiB > 0 {
		body.ResourceLimits["memory"] = fmt.Sprintf("%dMi", r.MemoryMiB)
	}
	if r := req.Resources; r.DiskGiB > 0 && a.sendsDisk() {
		body.ResourceLimits[diskResource] = fmt.Sprintf("%dGi", r.DiskGiB)
	}
	if req.TTLSeconds > 0 {
		t := max(req.TTLSeconds, minTimeoutSeconds)
		body.Timeout = &t
	}
	switch a.cfg.Egress {
	case "none":
		body.NetworkPolicy = &networkPolicy{DefaultAction: "deny", Egress: []networkRule{}}
	case "allowlist":
		p := &networkPolicy{DefaultAction: "deny"}
		for _, d := range a.cfg.EgressAllow {
			p.Egress = append(p.Egress, networkRule{Action: "allow", Target: d})
		}
		body.NetworkPolicy = p
	}
	return body, nil
}

// image picks the container image. With templateId set the pool serves that one
// template; any other is refused rather than silently replaced.
func (a *Adapter) image(template string) (string, error) {
	if id := a.cfg.TemplateID; id != "" {
		if template != "" && template != id {
			return "", adapters.InvalidRequest("opensandbox: this pool serves only template %q (config templateId), not %q", id, template).
				WithDetail("template", template)
		}
		if a.cfg.Image != "" {
			return a.cfg.Image, nil
		}
		return id, nil
	}
	if template != "" {
		return template, nil
	}
	if a.cfg.Image == "" {
		return "", adapters.InvalidRequest("opensandbox: no image: the request names no template and the pool sets no image")
	}
	return a.cfg.Image, nil
}

// checkSnapshot makes a missing or unusable snapshot an invalid_request before
// anything is created.
func (a *Adapter) checkSnapshot(ctx context.Context, ref string) error {
	snap, err := a.getSnapshot(ctx, ref)
	if api.IsCode(err, api.CodeNotFound) {
		return adapters.InvalidRequest("opensandbox: snapshot %q does not exist", ref)
	}
	if err != nil {
		return err
	}
	if snap.Status.State != "Ready" {
		return adapters.InvalidRequest("opensandbox: snapshot %q is %s, not Ready", ref, snap.Status.State)
	}
	return nil
}

func (a *Adapter) getSnapshot(ctx context.Context, ref string) (snapshotWire, error) {
	var snap snapshotWire
	if ref == "" {
		return snap, adapters.NotFound("opensandbox: empty snapshot id")
	}
	err := a.api.JSON(ctx, http.MethodGet, "/snapshots/"+url.PathEscape(ref), nil, nil, &snap)
	return snap, err
}

// waitRunning polls until the sandbox runs. Failed is this sandbox's failure
// (sandbox_failed); a sandbox that disappears meanwhile failed too, and so did one
// still on its way when the caller's deadline passed (httpx.WaitState).
func (a *Adapter) waitRunning(ctx context.Context, ref string) (adapters.Instance, error) {
	var inst adapters.Instance
	last := "not running" // until a read says more
	still := func() string { return fmt.Sprintf("opensandbox: sandbox %s was still %s", ref, last) }
	err := httpx.WaitState(ctx, a.poll, still, func(ctx context.Context) (bool, error) {
		var sb sandbox
		if err := a.api.JSON(ctx, http.MethodGet, "/sandboxes/"+url.PathEscape(ref), nil, nil, &sb); err != nil {
			if api.IsCode(err, api.CodeNotFound) {
				return false, adapters.SandboxFailed("opensandbox: sandbox %s disappeared while starting", ref)
			}
			return false, err
		}
		last = sb.Status.State
		switch sb.Status.State {
		case "Running":
			inst = a.instance(sb)
			return true, nil
		case "Failed":
			return false, adapters.SandboxFailed("opensandbox: sandbox %s failed: %s", ref, a.statusText(sb.Status))
		case "Stopping", "Terminated":
			return false, adapters.SandboxFailed("opensandbox: sandbox %s ended while starting: %s", ref, a.statusText(sb.Status))
		}
		return false, nil
	})
	return inst, err
}

// RenewTTL moves OpenSandbox's own expiry to ttlSeconds from now. OpenSandbox only
// moves an expiry later, so a shorter TTL leaves the later backstop in place (the
// control plane enforces its own TTL). 0 cannot remove an expiry once set, and
// moving it out by some amount would only have OpenSandbox delete a sandbox its
// owner was told does not expire: it is refused, and nothing changes.
func (a *Adapter) RenewTTL(ctx context.Context, ref string, ttlSeconds int64) error {
	if ttlSeconds < 0 {
		return adapters.InvalidRequest("ttlSeconds must not be negative")
	}
	sb, err := a.getSandbox(ctx, ref)
	if err != nil {
		return err
	}
	if sb.ExpiresAt == "" {
		return nil // created without a timeout: nothing expires it
	}
	if ttlSeconds == 0 {
		return (&api.Error{Code: api.CodeUnsupportedOperation, Message: "opensandbox: a sandbox created with a TTL " +
			"keeps an expiry on the backend, which OpenSandbox can move later but not remove; set a longer ttlSeconds instead"}).
			WithDetail("operation", "ttl.remove")
	}
	want := a.now().UTC().Add(time.Duration(max(ttlSeconds, minTimeoutSeconds)) * time.Second).Truncate(time.Second)
	if cur, err := time.Parse(time.RFC3339Nano, sb.ExpiresAt); err == nil && !want.After(cur) {
		return nil
	}
	in := map[string]string{"expiresAt": want.Format(time.RFC3339)}
	return a.api.JSON(ctx, http.MethodPost, "/sandboxes/"+url.PathEscape(ref)+"/renew-expiration", nil, in, nil)
}
