package sandboxes

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/server/lifecycle"
	"github.com/different-ai/differently/server/placement"
	"github.com/different-ai/differently/server/store"
)

// WarmOutcome is what became of a create that a warm shape matched.
type WarmOutcome string

// Warm outcomes, for metrics.
const (
	// WarmHit: the create took a warm sandbox.
	WarmHit WarmOutcome = "hit"
	// WarmMiss: a shape matched but none of its sandboxes was ready; created cold.
	WarmMiss WarmOutcome = "miss"
)

// claimWarm gives sb a ready warm sandbox of the first pool, in placement's ranking
// d, whose warm shape sb matches. ok is false, with nothing written, when sb cannot
// be served warm (a restore, no shape matches) or no matching warm sandbox was free:
// the create then goes on cold. A sandbox served warm is running already, so no
// Create is made for it.
func (s *Service) claimWarm(ctx context.Context, by lifecycle.Actor, sb store.Sandbox, d placement.Decision, snapshotPool string) (out store.Sandbox, created, ok bool, err error) {
	if d.Wait || snapshotPool != "" || sb.FromSnapshot != "" || len(sb.Env) > 0 {
		// Only what a warm sandbox runs can be given one: a restore has its own
		// disk, and an environment is given to an instance when it is created.
		return out, false, false, nil
	}
	// A miss is counted against the first pool and shape that matched.
	var (
		matched   bool
		missPool  string
		missShape store.WarmShape
	)
	for _, name := range d.Pools {
		v, found := s.pools.View(name)
		if !found {
			continue
		}
		for _, w := range v.Pool.Warm {
			if w.Size == 0 || !warmMatches(w, sb) {
				continue
			}
			if !matched {
				matched, missPool, missShape = true, name, w
			}
			began := s.now()
			out, created, err = s.claimOn(ctx, by, sb, name, w)
			if errors.Is(err, store.ErrNoWarm) {
				continue
			}
			if err == nil && created {
				s.observeWarm(name, w, WarmHit, s.now().Sub(began))
				if s.onClaim != nil {
					// The warm pool lost one: its filler starts another, and
					// records the hit just counted. The scheduler has nothing to
					// do until then (a claimed sandbox runs already), so it is not
					// woken here: a pass in the middle of a burst of claims would
					// only slow them.
					s.onClaim(name)
				}
			}
			return out, created, err == nil, err
		}
	}
	if matched {
		s.observeWarm(missPool, missShape, WarmMiss, 0)
	}
	return out, false, false, nil
}

// warmMatches reports whether a create asks for what shape w's sandboxes run: the
// same profile, and when the shape names none, the same template and resources.
// With a profile, the warm sandbox's own template and resources (the profile's as
// it was when it was made) are compared when it is claimed (lifecycle.Claim).
func warmMatches(w store.WarmShape, sb store.Sandbox) bool {
	if w.Profile != "" || sb.Profile != "" {
		return w.Profile == sb.Profile
	}
	return w.Template == sb.Template && w.Resources == sb.Resources
}

// claimOn takes one warm sandbox of shape w on pool for sb, under sb's project's
// admission (its quota; a claim never waits in the queue, so the queue's bound does
// not apply). A warm sandbox that runs something else than sb asks for (its shape's
// profile changed since) is not taken.
func (s *Service) claimOn(ctx context.Context, by lifecycle.Actor, sb store.Sandbox, pool string, w store.WarmShape) (store.Sandbox, bool, error) {
	insertCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), insertTimeout)
	defer cancel()
	now := s.now()
	out, created, err := s.st.ClaimWarm(insertCtx, now, sb, pool, store.WarmProject(pool, w),
		func(a store.Admission, warm store.Sandbox, ins *store.Sandbox) error {
			if err := store.CheckQuota(sb.Org, sb.Project, a.Quota, a.Usage, sb.Resources); err != nil {
				return err
			}
			if err := lifecycle.Claim(ins, warm, now, by); err != nil {
				if api.IsCode(err, api.CodeInvalidState) {
					return store.ErrNoWarm
				}
				return err
			}
			return nil
		})
	if err != nil {
		if errors.Is(err, store.ErrNoWarm) {
			return out, false, err
		}
		return out, false, fmt.Errorf("claim a warm sandbox: %w", err)
	}
	return out, created, nil
}

// observeWarm reports a warm hit (with how long the claim took) or miss.
func (s *Service) observeWarm(pool string, shape store.WarmShape, o WarmOutcome, took time.Duration) {
	if s.warmObserver != nil {
		s.warmObserver(pool, shape, o, took)
	}
}

// CreateWarm creates one warm sandbox of shape w on pool, for the warm-pool filler:
// it belongs to the warm pseudo-tenant (store.WarmOrg, in the shape's project), runs
// only on pool, never expires (the filler replaces it after the shape's
// maxAgeSeconds), and goes through admission like any create, so that the shape's
// project quota (its size) holds across replicas.
func (s *Service) CreateWarm(ctx context.Context, by lifecycle.Actor, pool string, w store.WarmShape) (store.Sandbox, error) {
	sb := store.Sandbox{
		Org: store.WarmOrg, Project: store.WarmProject(pool, w),
		Template: w.Template, Resources: w.Resources,
		Placement: store.Placement{AllowedPools: []string{pool}},
	}
	if w.Profile != "" {
		if err := s.applyProfile(ctx, &sb, w.Profile, true); err != nil {
			return sb, err
		}
		// The profile's pools and TTL do not apply: the shape is this pool's, and a
		// warm sandbox waits until it is claimed or replaced.
		sb.Placement = store.Placement{AllowedPools: []string{pool}}
		sb.TTLSeconds = 0
	}
	// The outcome of a direct Create reaches the store without this caller, and its
	// channel is buffered: it can be left unread.
	out, _, _, err := s.createAs(ctx, by, sb, "", false, false)
	return out, err
}
