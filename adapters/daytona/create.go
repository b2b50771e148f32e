package daytona

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/adapters/httpx"
	"github.com/different-ai/differently/api"
)

// Create returns the sandbox for req.ID, creating it when none exists, once it is
// started. The lookup by label comes first, so a Create retried after a lost answer
// finds the sandbox the first attempt made.
func (a *Adapter) Create(ctx context.Context, req adapters.CreateRequest) (adapters.Instance, error) {
	if err := req.Validate(); err != nil {
		return adapters.Instance{}, err
	}
	sb, found, err := a.lookup(ctx, req)
	if err != nil {
		return adapters.Instance{}, err
	}
	if !found {
		if sb, err = a.create(ctx, req); err != nil {
			return adapters.Instance{}, err
		}
	}
	return a.settle(ctx, sb)
}

// lookup finds the live sandbox already made for req's sandbox ID, if any.
func (a *Adapter) lookup(ctx context.Context, req adapters.CreateRequest) (sandbox, bool, error) {
	sbs, err := a.listByLabels(ctx, map[string]string{
		adapters.LabelSandboxID:    req.ID,
		adapters.LabelInstallation: req.Installation,
	})
	if err != nil || len(sbs) == 0 {
		return sandbox{}, false, err
	}
	return sbs[0], true, nil
}

func (a *Adapter) create(ctx context.Context, req adapters.CreateRequest) (sandbox, error) {
	snapshot := a.cfg.Snapshot
	if req.Template != "" {
		snapshot = req.Template
	}
	if req.FromSnapshot != "" {
		// Checked first so that a missing snapshot is reported as such, whatever
		// status Daytona's create would answer.
		if _, err := a.getSnapshot(ctx, req.FromSnapshot); api.IsCode(err, api.CodeNotFound) {
			return sandbox{}, adapters.InvalidRequest("daytona: snapshot %q does not exist", req.FromSnapshot)
		} else if err != nil {
			return sandbox{}, err
		}
		snapshot = req.FromSnapshot
	}
	body := createBody{
		// The name is the idempotency guard of last resort: Daytona keeps names unique
		// per organisation, so two racing Creates cannot both succeed.
		Name:     req.ID,
		Snapshot: snapshot,
		Target:   a.cfg.Target,
		Env:      req.Env,
		Labels:   adapters.OwnershipLabels(req.Labels, req.ID, req.Installation),
	}
	if req.TTLSeconds > 0 {
		body.TTLMinutes = ttlMinutes(req.TTLSeconds)
	}
	var sb sandbox
	err := a.api.JSON(ctx, http.MethodPost, "/sandbox", nil, body, &sb)
	switch {
	case err == nil:
		return sb, nil
	case api.IsCode(err, api.CodeInvalidState):
		// 409: the name is taken, normally by a concurrent Create of the same
		// sandbox. Adopt that sandbox if it is ours; never someone else's.
		existing, gerr := a.getSandbox(ctx, req.ID)
		if gerr != nil {
			return sandbox{}, err
		}
		if existing.Labels[adapters.LabelSandboxID] != req.ID || existing.Labels[adapters.LabelInstallation] != req.Installation {
			return sandbox{}, adapters.InvalidRequest("daytona: a sandbox named %s exists but does not belong to this installation", req.ID)
		}
		return existing, nil
	case api.IsCode(err, api.CodeNotFound):
		// The create route exists, so a 404 is about what the body names: the snapshot.
		return sandbox{}, adapters.InvalidRequest("daytona: snapshot %q was not found: %v", snapshot, err)
	}
	return sandbox{}, err
}

// settle waits for a sandbox to leave its transitional states. A sandbox in error is
// deleted (best effort) before sandbox_failed is returned, so that the scheduler's
// retry creates a fresh one rather than finding the broken one again.
func (a *Adapter) settle(ctx context.Context, sb sandbox) (adapters.Instance, error) {
	if instanceState(sb.State) == adapters.StatePending {
		var err error
		sb, err = a.waitFor(ctx, sb.ID, "started", "stopped", "paused", "archived")
		// An error state is dealt with below; anything else that ended the wait,
		// a sandbox still creating at the deadline included, is returned as it is,
		// and the sandbox left for a retry's lookup to find and wait for again.
		if err != nil && !failed(sb.State) {
			return adapters.Instance{}, err
		}
	}
	if failed(sb.State) {
		_ = a.Delete(ctx, sb.ID)
		return adapters.Instance{}, adapters.SandboxFailed("daytona: sandbox %s failed: %s", sb.ID, a.reason(sb))
	}
	return a.instance(sb), nil
}

// reason is why a sandbox failed in Daytona's words, without the API key in case
// Daytona quotes a request in them.
func (a *Adapter) reason(sb sandbox) string {
	if sb.ErrorReason != "" {
		return a.api.Scrub(sb.ErrorReason)
	}
	return "state " + sb.State
}

// waitFor polls a sandbox until it reaches one of the wanted states, bounded by ctx.
// An error state ends the wait with sandbox_failed and the sandbox as last seen, and
// so does a deadline that passes while Daytona answers that the sandbox is still on
// its way (httpx.WaitState).
func (a *Adapter) waitFor(ctx context.Context, id string, want ...string) (sandbox, error) {
	var last sandbox
	still := func() string {
		if last.State == "" {
			return fmt.Sprintf("daytona: sandbox %s was not %s yet", id, strings.Join(want, " or "))
		}
		return fmt.Sprintf("daytona: sandbox %s was still %s", id, last.State)
	}
	err := httpx.WaitState(ctx, a.poll, still, func(ctx context.Context) (bool, error) {
		sb, err := a.getSandbox(ctx, id)
		if err != nil {
			return false, err
		}
		last = sb
		for _, w := range want {
			if sb.State == w {
				return true, nil
			}
		}
		if failed(sb.State) {
			return false, adapters.SandboxFailed("daytona: sandbox %s failed: %s", id, a.reason(sb))
		}
		return false, nil
	})
	if err != nil && ctx.Err() != nil && last.ID != "" && !api.IsCode(err, api.CodeSandboxFailed) {
		return last, adapters.Unavailable("%s when the wait ended: %v", still(), ctx.Err())
	}
	return last, err
}

type snapshotInfo struct {
	ID          string   `json:"id"`
	Name        string   `json:"name"`
	State       string   `json:"state"`
	Size        *float64 `json:"size"`
	ErrorReason *string  `json:"errorReason"`
}

func (a *Adapter) getSnapshot(ctx context.Context, idOrName string) (snapshotInfo, error) {
	var s snapshotInfo
	err := a.api.JSON(ctx, http.MethodGet, "/snapshots/"+url.PathEscape(idOrName), nil, nil, &s)
	return s, err
}
