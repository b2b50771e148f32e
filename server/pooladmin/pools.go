package pooladmin

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/server/apierr"
	"github.com/different-ai/differently/server/pools"
	"github.com/different-ai/differently/server/sandboxes"
	"github.com/different-ai/differently/server/store"
)

// Pool is a pool as an admin sees it: its definition, this replica's view of it and
// how many sandboxes it holds.
type Pool struct {
	// Pool is the stored definition, or the view's for a pool the store does not
	// hold (declared elsewhere).
	Pool store.Pool
	// View is nil when the pool has not been built or probed yet.
	View *pools.View
	// Sandboxes counts the pool's sandboxes that have not ended.
	Sandboxes int
	// Warm is where each of the pool's warm shapes stands, in the order of
	// Pool.Warm.
	Warm []WarmCount
}

// WarmCount is how many sandboxes of a warm shape are ready and starting, and the
// creates it matched (every replica's, as last recorded).
type WarmCount struct {
	Shape           store.WarmShape
	Ready, Starting int
	Stats           store.WarmStats
}

// warmTally counts the warm sandboxes that are ready or starting by their shape's
// project (store.WarmProject), which names the pool: a queued one has no pool yet.
// One listing serves every pool of an answer.
func (s *Service) warmTally(ctx context.Context) (map[string]WarmCount, error) {
	tally := map[string]WarmCount{}
	err := s.st.EachSandbox(ctx, store.SandboxFilter{Org: store.WarmOrg, States: []store.State{
		store.StateQueued, store.StateProvisioning, store.StateRunning}}, func(sb store.Sandbox) error {
		c := tally[sb.Project]
		if sb.State == store.StateRunning {
			c.Ready++
		} else {
			c.Starting++
		}
		tally[sb.Project] = c
		return nil
	})
	return tally, err
}

// warmCounts is where each of p's shapes stands: its sandboxes from tally
// (warmTally), and the creates it matched.
func (s *Service) warmCounts(ctx context.Context, p store.Pool, tally map[string]WarmCount) ([]WarmCount, error) {
	out := make([]WarmCount, len(p.Warm))
	for i, w := range p.Warm {
		c := tally[store.WarmProject(p.Name, w)]
		out[i] = WarmCount{Shape: w, Ready: c.Ready, Starting: c.Starting}
	}
	stats, err := s.st.ListWarmStats(ctx, p.Name)
	if err != nil {
		return nil, err
	}
	for _, st := range stats {
		for i := range out {
			if out[i].Shape.Key() == st.Shape {
				out[i].Stats = st
			}
		}
	}
	return out, nil
}

// List returns every pool, sorted by name: the stored ones and those the pool
// manager knows but the store does not (declared elsewhere), since an operator
// should see every pool that can take work.
func (s *Service) List(ctx context.Context) ([]Pool, error) {
	stored, err := s.st.ListPools(ctx)
	if err != nil {
		return nil, err
	}
	counts, err := s.st.CountSandboxesByPool(ctx, store.NonTerminalStates)
	if err != nil {
		return nil, err
	}
	views := map[string]pools.View{}
	for _, v := range s.pools.Views() {
		views[v.Pool.Name] = v
	}
	out := []Pool{}
	var tally map[string]WarmCount
	for _, p := range stored {
		var vp *pools.View
		if v, ok := views[p.Name]; ok {
			vp = &v
		}
		var warm []WarmCount
		if len(p.Warm) > 0 {
			if tally == nil {
				if tally, err = s.warmTally(ctx); err != nil {
					return nil, fmt.Errorf("count warm sandboxes: %w", err)
				}
			}
			if warm, err = s.warmCounts(ctx, p, tally); err != nil {
				return nil, fmt.Errorf("count warm sandboxes: %w", err)
			}
		}
		out = append(out, Pool{Pool: p, View: vp, Sandboxes: counts[p.Name], Warm: warm})
		delete(views, p.Name)
	}
	for _, name := range slices.Sorted(maps.Keys(views)) {
		v := views[name]
		out = append(out, Pool{Pool: v.Pool, View: &v, Sandboxes: counts[name]})
	}
	slices.SortFunc(out, func(a, b Pool) int { return strings.Compare(a.Pool.Name, b.Pool.Name) })
	return out, nil
}

// Get returns one pool, stored or known only to the pool manager.
func (s *Service) Get(ctx context.Context, name string) (Pool, error) {
	p, err := s.st.GetPool(ctx, name)
	if api.IsCode(err, api.CodeNotFound) {
		if v, ok := s.pools.View(name); ok {
			p, err = v.Pool, nil
		}
	}
	if err != nil {
		return Pool{}, err
	}
	return s.answer(ctx, p)
}

// answer is p with this replica's view of it and its sandbox count.
func (s *Service) answer(ctx context.Context, p store.Pool) (Pool, error) {
	counts, err := s.st.CountSandboxesByPool(ctx, store.NonTerminalStates)
	if err != nil {
		return Pool{}, fmt.Errorf("count sandboxes: %w", err)
	}
	out := Pool{Pool: p, Sandboxes: counts[p.Name]}
	if v, ok := s.pools.View(p.Name); ok {
		out.View = &v
	}
	if len(p.Warm) > 0 {
		tally, err := s.warmTally(ctx)
		if err == nil {
			out.Warm, err = s.warmCounts(ctx, p, tally)
		}
		if err != nil {
			return Pool{}, fmt.Errorf("count warm sandboxes: %w", err)
		}
	}
	return out, nil
}

// Create checks a new pool and stores it as the API's; its name must be free.
func (s *Service) Create(ctx context.Context, p store.Pool) (Pool, error) {
	if err := s.validate(p); err != nil {
		return Pool{}, err
	}
	if err := s.checkKind(p.Adapter); err != nil {
		return Pool{}, err
	}
	if err := s.checkConfig(ctx, p); err != nil {
		return Pool{}, err
	}
	p.Source = store.PoolFromAPI
	stored, err := s.st.CreatePool(ctx, s.now(), p)
	if api.IsCode(err, api.CodeInvalidState) {
		// Taken: say so in the words that tell the operator where to go when the
		// name is the config file's.
		if cur, gerr := s.st.GetPool(ctx, p.Name); gerr == nil && cur.Source == store.PoolFromConfig {
			err = store.ConfigPool(p.Name)
		}
	}
	if err != nil {
		return Pool{}, err
	}
	s.refresh(ctx)
	s.sched.Notify()
	return s.answer(ctx, stored)
}

// Replace puts next in the place of the pool name, which must already be the API's.
// A pool keeps its name and its adapter kind: another kind is another pool.
func (s *Service) Replace(ctx context.Context, name string, next store.Pool) (out Pool, rebuilt bool, err error) {
	return s.Update(ctx, name, func(cur store.Pool) (store.Pool, error) {
		if next.Name != cur.Name {
			return cur, apierr.Invalid("a pool cannot be renamed (%q in the body, %q in the path)", next.Name, cur.Name)
		}
		if next.Adapter != cur.Adapter {
			return cur, apierr.Invalid("a pool's adapter cannot change (%q to %q); create a new pool", cur.Adapter, next.Adapter)
		}
		return next, nil
	})
}

// Update applies change to the stored pool under optimistic concurrency: the write
// fails with invalid_state if another writer changed the pool since it was read. A
// config file's pool is refused with invalid_state before anything else: the next
// start would write the file's definition back, so the change would last only
// until then. A start that takes a pool over between the read and the write bumps
// its version, so the write loses. rebuilt says the change made the pool manager
// build the pool's adapter anew, which loses the instances an adapter holds only in
// memory.
func (s *Service) Update(ctx context.Context, name string, change func(cur store.Pool) (store.Pool, error)) (out Pool, rebuilt bool, err error) {
	cur, err := s.apiPool(ctx, name)
	if err != nil {
		return Pool{}, false, err
	}
	next, err := change(cur)
	if err != nil {
		return Pool{}, false, err
	}
	next.Name, next.Version, next.CreatedAt, next.Source = cur.Name, cur.Version, cur.CreatedAt, cur.Source
	if err := s.validate(next); err != nil {
		return Pool{}, false, err
	}
	if err := s.checkConfig(ctx, next); err != nil {
		return Pool{}, false, err
	}
	stored, err := s.st.UpdatePool(ctx, s.now(), next)
	if err != nil {
		return Pool{}, false, err
	}
	s.refresh(ctx)
	s.sched.Notify()
	out, err = s.answer(ctx, stored)
	if err != nil {
		return Pool{}, false, err
	}
	return out, pools.RebuildsAdapter(cur, stored), nil
}

// apiPool is the stored pool name, or an error when there is none or when it is
// the config file's, which the API may not change or delete.
func (s *Service) apiPool(ctx context.Context, name string) (store.Pool, error) {
	p, err := s.st.GetPool(ctx, name)
	if err == nil && p.Source == store.PoolFromConfig {
		return p, store.ConfigPool(name)
	}
	return p, err
}

// validate checks a pool definition the way the config file's pools are checked,
// the operator's credentials allowlist included.
func (s *Service) validate(p store.Pool) error {
	if err := sandboxes.ValidPoolName(p.Name); err != nil {
		return err
	}
	if err := p.Trust.Validate(); err != nil {
		return err
	}
	if p.MaxConcurrency < 0 || p.MaxStarting < 0 {
		return apierr.Invalid("maxConcurrency and maxStarting must not be negative")
	}
	if p.CostModel.CPUHour < 0 || p.CostModel.MemoryGiBHour < 0 {
		return apierr.Invalid("costModel prices must not be negative")
	}
	if err := s.allowed.Check(p.CredentialsEnv); err != nil {
		return err
	}
	return adapters.ValidateDeclaredFeatures(p.Features)
}

// checkKind refuses adapter kinds this build cannot run, and development-only kinds
// outside dev mode: a pool that can never be built is a mistake to report now.
func (s *Service) checkKind(kind string) error {
	known := s.kinds()
	if !slices.Contains(known, kind) {
		sorted := slices.Sorted(slices.Values(known))
		return apierr.Invalid("unknown adapter kind %q (this build knows: %s)", kind, strings.Join(sorted, ", ")).
			WithDetail("known", sorted)
	}
	if slices.Contains(s.devOnly, kind) && !s.dev {
		return apierr.Invalid("adapter kind %q is for development only (run the daemon with --dev)", kind)
	}
	return nil
}

// checkConfig refuses an adapter config the pool's kind would refuse to build from
// (an unknown key, a value of the wrong type, a missing endpoint, an ftp:// URL), so
// that it is reported to the admin who wrote it instead of stored and failing later.
func (s *Service) checkConfig(ctx context.Context, p store.Pool) error {
	if s.checkCfg == nil {
		return nil
	}
	return s.checkCfg(ctx, p.Adapter, p.Config)
}
