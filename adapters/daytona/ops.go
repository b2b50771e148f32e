package daytona

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/adapters/httpx"
	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/internal/ids"
)

// previewURLSeconds is how long an exposed port's signed URL stays valid.
const previewURLSeconds = 3600

// transition moves a sandbox to target with action, unless it is already there, and
// waits for it to arrive. A sandbox already on its way is only waited for, so a
// repeated call is a no-op rather than a conflict.
func (a *Adapter) transition(ctx context.Context, ref, action, transit string, target ...string) error {
	sb, err := a.getSandbox(ctx, ref)
	if err != nil {
		return err
	}
	for _, t := range target {
		if sb.State == t {
			return nil
		}
	}
	if sb.State != transit {
		if err := a.api.JSON(ctx, http.MethodPost, "/sandbox/"+url.PathEscape(sb.ID)+"/"+action, nil, nil, nil); err != nil {
			return err
		}
	}
	_, err = a.waitFor(ctx, sb.ID, target...)
	return err
}

// Stop stops a sandbox, keeping its disk. An archived sandbox counts as stopped.
func (a *Adapter) Stop(ctx context.Context, ref string) error {
	return a.transition(ctx, ref, "stop", "stopping", "stopped", "archived")
}

// Start starts a stopped (or archived) sandbox.
func (a *Adapter) Start(ctx context.Context, ref string) error {
	return a.transition(ctx, ref, "start", "starting", "started")
}

// Pause freezes a linux-vm sandbox with its memory; containers cannot pause.
func (a *Adapter) Pause(ctx context.Context, ref string) error {
	if a.cfg.Class != ClassLinuxVM {
		return adapters.Unsupported("lifecycle.pause-resume")
	}
	return a.transition(ctx, ref, "pause", "pausing", "paused")
}

// Resume resumes a paused sandbox: Daytona's start does that from the paused state.
func (a *Adapter) Resume(ctx context.Context, ref string) error {
	if a.cfg.Class != ClassLinuxVM {
		return adapters.Unsupported("lifecycle.pause-resume")
	}
	return a.transition(ctx, ref, "start", "resuming", "started")
}

type snapshotBody struct {
	Name          string `json:"name"`
	IncludeMemory bool   `json:"includeMemory"`
}

// Snapshot captures a sandbox as a named Daytona snapshot; the ref is its name, which
// Create accepts as FromSnapshot. Daytona snapshots a running VM only with its memory
// (a disk-only snapshot needs a stopped VM), so a disk request on a running linux-vm
// sandbox takes a memory snapshot and reports it as such. Containers have no memory
// snapshots.
func (a *Adapter) Snapshot(ctx context.Context, ref string, kind adapters.SnapshotKind) (adapters.Snapshot, error) {
	if err := kind.Validate(); err != nil {
		return adapters.Snapshot{}, err
	}
	if kind == adapters.SnapshotMemory && a.cfg.Class != ClassLinuxVM {
		return adapters.Snapshot{}, adapters.Unsupported("snapshots.memory")
	}
	sb, err := a.getSandbox(ctx, ref)
	if err != nil {
		return adapters.Snapshot{}, err
	}
	memory := kind == adapters.SnapshotMemory
	if a.cfg.Class == ClassLinuxVM && sb.State == "started" {
		memory = true
	}
	if memory && sb.State != "started" {
		return adapters.Snapshot{}, adapters.InvalidState("daytona: a memory snapshot needs a started sandbox; %s is %s", ref, sb.State)
	}
	name := ids.New("dly-snap")
	if sent, err := a.snapshot(ctx, ref, sb, name, memory); err != nil {
		if sent {
			a.removeSnapshot(ctx, name)
		}
		return adapters.Snapshot{}, err
	}
	out := adapters.Snapshot{Ref: name, Kind: adapters.SnapshotDisk}
	if memory {
		out.Kind = adapters.SnapshotMemory
	}
	return out, nil
}

// snapshot takes the snapshot name of sb and waits for it to turn active and for the
// sandbox to return to the state it was in. sent reports whether Daytona may have
// taken the request: it answered it, or the answer was lost or was a 5xx.
func (a *Adapter) snapshot(ctx context.Context, ref string, sb sandbox, name string, memory bool) (sent bool, err error) {
	body := snapshotBody{Name: name, IncludeMemory: memory}
	if err := a.api.JSON(ctx, http.MethodPost, "/sandbox/"+url.PathEscape(sb.ID)+"/snapshot", nil, body, nil); err != nil {
		return api.IsCode(err, api.CodeProviderUnavailable), err
	}
	// Snapshotting is asynchronous: the snapshot turns active, and the sandbox returns
	// to the state it was in.
	err = httpx.Poll(ctx, a.poll, func(ctx context.Context) (bool, error) {
		s, err := a.getSnapshot(ctx, name)
		switch {
		case api.IsCode(err, api.CodeNotFound):
			return false, nil // not registered yet
		case err != nil:
			return false, err
		case s.State == "active":
			return true, nil
		case s.State == "error" || s.State == "build_failed":
			msg := s.State
			if s.ErrorReason != nil && *s.ErrorReason != "" {
				msg = a.api.Scrub(*s.ErrorReason)
			}
			return false, adapters.SandboxFailed("daytona: snapshot of %s failed: %s", ref, msg)
		}
		return false, nil
	})
	if err != nil {
		return true, err
	}
	_, err = a.waitFor(ctx, sb.ID, sb.State)
	return true, err
}

// removeSnapshot deletes the snapshot name that a failed Snapshot may have left:
// nobody will ever hear of the name, so Daytona would keep it, and bill it, for
// ever. Daytona may register it a while after the request, so it is looked for
// until found and deleted, or until cleanupTimeout, after the caller's own context
// has ended if it has: best effort, on the failure's path only.
func (a *Adapter) removeSnapshot(ctx context.Context, name string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	_ = httpx.Poll(ctx, a.poll, func(ctx context.Context) (bool, error) {
		found, err := a.deleteNamed(ctx, name)
		// Not registered yet, or Daytona away: look again.
		return found && err == nil, nil
	})
}

// cleanupTimeout bounds the removal of what a failed operation left behind.
const cleanupTimeout = 30 * time.Second

// DeleteSnapshot removes a snapshot by name. Daytona deletes by ID, so the name is
// resolved first; a missing snapshot is success.
func (a *Adapter) DeleteSnapshot(ctx context.Context, snapshotRef string) error {
	if snapshotRef == "" {
		return nil
	}
	_, err := a.deleteNamed(ctx, snapshotRef)
	return err
}

// deleteNamed deletes the snapshot called name and reports whether Daytona had one
// by that name; one that goes between the lookup and the delete counts as deleted.
func (a *Adapter) deleteNamed(ctx context.Context, name string) (found bool, err error) {
	s, err := a.getSnapshot(ctx, name)
	switch {
	case api.IsCode(err, api.CodeNotFound):
		return false, nil
	case err != nil:
		return false, err
	}
	err = a.api.JSON(ctx, http.MethodDelete, "/snapshots/"+url.PathEscape(s.ID), nil, nil, nil)
	if api.IsCode(err, api.CodeNotFound) {
		err = nil
	}
	return true, err
}

type signedPreview struct {
	URL string `json:"url"`
}

// ExposePort returns a signed preview URL for the port, valid for an hour. Anyone
// holding the URL reaches the port until it expires.
func (a *Adapter) ExposePort(ctx context.Context, ref string, port int) (string, error) {
	if port < 1 || port > 65535 {
		return "", adapters.InvalidRequest("daytona: port %d is out of range", port)
	}
	if ref == "" {
		return "", adapters.NotFound("daytona: empty sandbox ref")
	}
	path := fmt.Sprintf("/sandbox/%s/ports/%d/signed-preview-url", url.PathEscape(ref), port)
	var out signedPreview
	q := url.Values{"expiresInSeconds": {fmt.Sprint(previewURLSeconds)}}
	if err := a.api.JSON(ctx, http.MethodGet, path, q, nil, &out); err != nil {
		return "", err
	}
	if out.URL == "" {
		return "", adapters.Unavailable("daytona: signed preview URL for %s port %d is empty", ref, port)
	}
	return out.URL, nil
}
