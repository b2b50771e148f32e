package sandboxes

import (
	"context"
	"maps"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/server/apierr"
	"github.com/different-ai/differently/server/store"
)

// Patch is a change of a sandbox's labels and TTL; a nil field is left as it is.
type Patch struct {
	Labels     *map[string]string
	TTLSeconds *int64
}

// Update changes a sandbox's labels and TTL. A new TTL of a sandbox that runs (or
// is stopped or paused) counts from now, and is first given to its backend where
// the adapter keeps an expiry of its own (renewBackendTTL).
func (s *Service) Update(ctx context.Context, c Caller, id string, p Patch) (store.Sandbox, error) {
	if p.Labels != nil {
		if err := adapters.ValidateLabels(*p.Labels); err != nil {
			return store.Sandbox{}, err
		}
	}
	if p.TTLSeconds != nil {
		if err := checkTTL(*p.TTLSeconds); err != nil {
			return store.Sandbox{}, err
		}
	}
	current, err := s.Sandbox(ctx, c, id)
	if err != nil {
		return store.Sandbox{}, err
	}
	if p.TTLSeconds != nil {
		if err := s.renewBackendTTL(ctx, current, *p.TTLSeconds); err != nil {
			return store.Sandbox{}, err
		}
	}
	now := s.now()
	return s.update(ctx, id, func(sb *store.Sandbox) error {
		if sb.State.IsTerminal() || sb.State == store.StateTerminating {
			return apierr.Conflict("sandbox is %s", sb.State)
		}
		if p.Labels != nil {
			sb.Labels = maps.Clone(*p.Labels)
		}
		if p.TTLSeconds != nil {
			sb.TTLSeconds = *p.TTLSeconds
			// A sandbox not yet running gets its expiry when it starts running; one
			// that runs counts the new TTL from now.
			switch sb.State {
			case store.StateRunning, store.StateStopped, store.StatePaused:
				sb.ExpiresAt = nil
				if sb.TTLSeconds > 0 {
					sb.ExpiresAt = ptr(store.ExpiresAt(now, sb.TTLSeconds))
				}
			}
		}
		return nil
	})
}

// renewBackendTTL moves the backend's own expiry of a live sandbox, where the adapter
// keeps one, before the database records the new TTL: if the backend refuses, nothing
// changes; if the database write then fails, the backend merely holds the instance
// longer than the control plane will, which the control plane's own expiry ends.
func (s *Service) renewBackendTTL(ctx context.Context, sb store.Sandbox, ttl int64) error {
	switch sb.State {
	case store.StateRunning, store.StateStopped, store.StatePaused:
	default:
		return nil
	}
	if sb.BackendRef == "" {
		return nil
	}
	view, ok := s.pools.View(sb.Pool)
	if !ok || view.Adapter == nil {
		return nil
	}
	renewer, ok := view.Adapter.(adapters.TTLRenewer)
	if !ok {
		return nil
	}
	return renewer.RenewTTL(ctx, sb.BackendRef, ttl)
}
