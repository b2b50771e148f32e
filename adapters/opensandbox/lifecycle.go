package opensandbox

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/adapters/httpx"
	"github.com/different-ai/differently/api"
)

// pauseStartGrace is how long a sandbox may stay Running after a pause was accepted
// before the adapter concludes the runtime cannot pause.
const pauseStartGrace = 30 * time.Second

// Stop freezes the sandbox through OpenSandbox's pause, which on the Kubernetes
// runtime commits the root filesystem and frees the pod. Only offered there.
func (a *Adapter) Stop(ctx context.Context, ref string) error {
	if !a.has(adapters.FeatureStopStart) {
		return adapters.Unsupported(adapters.FeatureStopStart)
	}
	return a.pause(ctx, ref)
}

// Start recreates a stopped sandbox through OpenSandbox's resume.
func (a *Adapter) Start(ctx context.Context, ref string) error {
	if !a.has(adapters.FeatureStopStart) {
		return adapters.Unsupported(adapters.FeatureStopStart)
	}
	return a.resume(ctx, ref)
}

// Pause freezes the sandbox with its memory (Docker runtime only).
func (a *Adapter) Pause(ctx context.Context, ref string) error {
	if !a.has(adapters.FeaturePauseResume) {
		return adapters.Unsupported(adapters.FeaturePauseResume)
	}
	return a.pause(ctx, ref)
}

// Resume unfreezes a paused sandbox (Docker runtime only).
func (a *Adapter) Resume(ctx context.Context, ref string) error {
	if !a.has(adapters.FeaturePauseResume) {
		return adapters.Unsupported(adapters.FeaturePauseResume)
	}
	return a.resume(ctx, ref)
}

// pause asks for a pause unless one is done or under way, then polls until Paused.
// Pause answers 202 with no body.
func (a *Adapter) pause(ctx context.Context, ref string) error {
	sb, err := a.getSandbox(ctx, ref)
	if err != nil {
		return err
	}
	a.dropExecd(ref)
	switch sb.Status.State {
	case "Paused":
		return nil
	case "Running":
		if err := a.api.JSON(ctx, http.MethodPost, "/sandboxes/"+url.PathEscape(ref)+"/pause", nil, nil, nil); err != nil {
			return err
		}
	case "Pausing":
	default:
		return adapters.InvalidState("opensandbox: cannot pause sandbox %s in state %s", ref, sb.Status.State)
	}
	started := a.now()
	return a.settle(ctx, ref, "Paused", func(state string) error {
		if state == "Running" && a.now().Sub(started) > pauseStartGrace {
			return adapters.Unsupported("pause on this OpenSandbox runtime")
		}
		return nil
	})
}

// resume asks for a resume unless the sandbox runs, polls until Running and then
// waits for execd to answer, so the next exec does not race its start.
func (a *Adapter) resume(ctx context.Context, ref string) error {
	sb, err := a.getSandbox(ctx, ref)
	if err != nil {
		return err
	}
	a.dropExecd(ref)
	switch sb.Status.State {
	case "Running":
		return nil
	case "Paused":
		if err := a.api.JSON(ctx, http.MethodPost, "/sandboxes/"+url.PathEscape(ref)+"/resume", nil, nil, nil); err != nil {
			return err
		}
	case "Resuming":
	default:
		return adapters.InvalidState("opensandbox: cannot resume sandbox %s in state %s", ref, sb.Status.State)
	}
	if err := a.settle(ctx, ref, "Running", nil); err != nil {
		return err
	}
	return httpx.Poll(ctx, a.poll, func(ctx context.Context) (bool, error) {
		err := a.execdJSON(ctx, ref, http.MethodGet, "/ping", nil, nil, nil)
		if api.IsCode(err, api.CodeProviderUnavailable) {
			return false, nil
		}
		return err == nil, err
	})
}

// settle polls the sandbox until it reaches want; Failed ends the wait.
func (a *Adapter) settle(ctx context.Context, ref, want string, check func(state string) error) error {
	return httpx.Poll(ctx, a.poll, func(ctx context.Context) (bool, error) {
		sb, err := a.getSandbox(ctx, ref)
		if err != nil {
			return false, err
		}
		switch sb.Status.State {
		case want:
			return true, nil
		case "Failed":
			return false, adapters.SandboxFailed("opensandbox: sandbox %s failed: %s", ref, a.statusText(sb.Status))
		}
		if check != nil {
			return false, check(sb.Status.State)
		}
		return false, nil
	})
}

// Snapshot captures the sandbox and polls the snapshot until Ready. What it holds
// depends on the runtime; it is reported as the kind asked for, and memory only
// when the pool declares snapshots.memory.
func (a *Adapter) Snapshot(ctx context.Context, ref string, kind adapters.SnapshotKind) (adapters.Snapshot, error) {
	if err := kind.Validate(); err != nil {
		return adapters.Snapshot{}, err
	}
	feature := adapters.FeatureSnapshotsDisk
	if kind == adapters.SnapshotMemory {
		feature = adapters.FeatureSnapshotsMemory
	}
	if !a.has(feature) {
		return adapters.Snapshot{}, adapters.Unsupported(feature)
	}
	if err := a.running(ctx, ref); err != nil {
		return adapters.Snapshot{}, err
	}
	var snap snapshotWire
	if err := a.api.JSON(ctx, http.MethodPost, "/sandboxes/"+url.PathEscape(ref)+"/snapshots", nil, struct{}{}, &snap); err != nil {
		return adapters.Snapshot{}, err
	}
	if snap.ID == "" {
		return adapters.Snapshot{}, adapters.Unavailable("opensandbox: snapshot answered without an id")
	}
	err := httpx.Poll(ctx, a.poll, func(ctx context.Context) (bool, error) {
		s, err := a.getSnapshot(ctx, snap.ID)
		if err != nil {
			return false, err
		}
		switch s.Status.State {
		case "Ready":
			return true, nil
		case "Failed":
			return false, adapters.SandboxFailed("opensandbox: snapshot %s of sandbox %s failed: %s", snap.ID, ref,
				a.statusText(sandboxStatus(s.Status)))
		}
		return false, nil
	})
	if err != nil {
		return adapters.Snapshot{}, err
	}
	return adapters.Snapshot{Ref: snap.ID, Kind: kind}, nil
}

// DeleteSnapshot removes a snapshot; a missing one is success.
func (a *Adapter) DeleteSnapshot(ctx context.Context, snapshotRef string) error {
	if snapshotRef == "" {
		return nil
	}
	err := a.api.JSON(ctx, http.MethodDelete, "/snapshots/"+url.PathEscape(snapshotRef), nil, nil, nil)
	if api.IsCode(err, api.CodeNotFound) {
		return nil
	}
	return err
}

// ExposePort returns a signed, time-limited URL for a guest port (ports: signed).
// An endpoint that needs request headers cannot be handed out as a URL.
func (a *Adapter) ExposePort(ctx context.Context, ref string, port int) (string, error) {
	if !a.has(adapters.FeaturePortsExpose) {
		return "", adapters.Unsupported(adapters.FeaturePortsExpose)
	}
	if port < 1 || port > 65535 {
		return "", adapters.InvalidRequest("opensandbox: port %d is outside 1 to 65535", port)
	}
	if err := a.running(ctx, ref); err != nil {
		return "", err
	}
	expires := a.now().Add(time.Duration(a.cfg.PortURLSeconds) * time.Second).Unix()
	var ep endpoint
	p := fmt.Sprintf("/sandboxes/%s/endpoints/%d", url.PathEscape(ref), port)
	if err := a.api.JSON(ctx, http.MethodGet, p, url.Values{"expires": {strconv.FormatInt(expires, 10)}}, nil, &ep); err != nil {
		return "", err
	}
	if ep.Endpoint == "" {
		return "", adapters.Unavailable("opensandbox: no endpoint reported for port %d", port)
	}
	if len(ep.Headers) > 0 {
		return "", api.Errorf(api.CodeUnsupportedOperation,
			"opensandbox: the endpoint for port %d needs request headers, so it cannot be shared as a URL", port).
			WithDetail("operation", adapters.FeaturePortsExpose)
	}
	return a.withScheme(ep.Endpoint), nil
}
