package httpapi

import (
	"context"
	"errors"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/server/lifecycle"
	"github.com/different-ai/differently/server/pools"
	"github.com/different-ai/differently/server/store"
)

// liveStates are the non-terminal states a forced pool delete moves to terminating.
var liveStates = []store.State{store.StateQueued, store.StateProvisioning, store.StateRunning,
	store.StateStopped, store.StatePaused}

func validPoolName(name string) error {
	if !api.ValidName(name) {
		return invalid("pool name %q must be 1 to 63 lowercase letters, digits and dashes, starting and ending with a letter or digit", name)
	}
	return nil
}

// validatePool checks a pool definition the way the config file's pools are checked,
// the operator's credentials allowlist included.
func (s *Server) validatePool(p store.Pool) error {
	if err := validPoolName(p.Name); err != nil {
		return err
	}
	if err := p.Trust.Validate(); err != nil {
		return err
	}
	if p.MaxConcurrency < 0 || p.MaxStarting < 0 {
		return invalid("maxConcurrency and maxStarting must not be negative")
	}
	if p.CostModel.CPUHour < 0 || p.CostModel.MemoryGiBHour < 0 {
		return invalid("costModel prices must not be negative")
	}
	if err := s.allowed.Check(p.CredentialsEnv); err != nil {
		return err
	}
	return adapters.ValidateDeclaredFeatures(p.Features)
}

// checkKind refuses adapter kinds this build cannot run, and development-only kinds
// outside dev mode: a pool that can never be built is a mistake to report now.
func (s *Server) checkKind(kind string) error {
	known := s.kinds()
	if !slices.Contains(known, kind) {
		sorted := slices.Sorted(slices.Values(known))
		return invalid("unknown adapter kind %q (this build knows: %s)", kind, strings.Join(sorted, ", ")).
			WithDetail("known", sorted)
	}
	if slices.Contains(s.devOnly, kind) && !s.dev {
		return invalid("adapter kind %q is for development only (run the daemon with --dev)", kind)
	}
	return nil
}

// checkConfig refuses an adapter config the pool's kind would refuse to build from
// (an unknown key, a value of the wrong type, a missing endpoint, an ftp:// URL), so
// that it is reported to the admin who wrote it instead of stored and failing later.
func (s *Server) checkConfig(ctx context.Context, p store.Pool) error {
	if s.checkCfg == nil {
		return nil
	}
	return s.checkCfg(ctx, p.Adapter, p.Config)
}

// specToPool builds a stored pool from a full spec; trust defaults to private.
func specToPool(spec PoolSpec) store.Pool {
	p := store.Pool{
		Name: spec.Name, Adapter: spec.Adapter, Trust: api.TrustPrivate,
		Region: deref(spec.Region), MaxConcurrency: deref(spec.MaxConcurrency),
		MaxStarting: deref(spec.MaxStarting), Config: deref(spec.Config), Features: deref(spec.Features),
	}
	if spec.Trust != nil {
		p.Trust = api.Trust(*spec.Trust)
	}
	if c := spec.CostModel; c != nil {
		p.CostModel = store.CostModel{CPUHour: deref(c.CpuHour), MemoryGiBHour: deref(c.MemoryGiBHour)}
	}
	if spec.Credentials != nil {
		p.CredentialsEnv = deref(spec.Credentials.Env)
	}
	return p
}

// poolAnswer is the pool as GET shows it, with this replica's view and sandbox count.
func (s *Server) poolAnswer(ctx context.Context, p store.Pool) (Pool, error) {
	counts, err := s.st.CountSandboxesByPool(ctx, store.NonTerminalStates)
	if err != nil {
		return Pool{}, errorf("count sandboxes: %w", err)
	}
	var vp *pools.View
	if v, ok := s.pools.View(p.Name); ok {
		vp = &v
	}
	return toPool(p, vp, counts[p.Name]), nil
}

// refresh rebuilds the pool views after a change, so that the answer and the next
// placement see it. A failure is logged: the change is stored, and the periodic
// refresh will pick it up.
func (s *Server) refresh(ctx context.Context) {
	if err := s.pools.Refresh(ctx); err != nil {
		s.log.Warn("refresh pools after an admin change", "error", err)
	}
}

func (s *Server) ListPools(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	stored, err := s.st.ListPools(ctx)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	counts, err := s.st.CountSandboxesByPool(ctx, store.NonTerminalStates)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	views := map[string]pools.View{}
	for _, v := range s.pools.Views() {
		views[v.Pool.Name] = v
	}
	out := PoolList{Items: []Pool{}}
	for _, p := range stored {
		var vp *pools.View
		if v, ok := views[p.Name]; ok {
			vp = &v
		}
		out.Items = append(out.Items, toPool(p, vp, counts[p.Name]))
		delete(views, p.Name)
	}
	// Pools the pool manager knows but the store does not (declared elsewhere) are
	// listed too: an operator should see every pool that can take work.
	for _, name := range slices.Sorted(maps.Keys(views)) {
		v := views[name]
		out.Items = append(out.Items, toPool(v.Pool, &v, counts[name]))
	}
	slices.SortFunc(out.Items, func(a, b Pool) int { return strings.Compare(a.Name, b.Name) })
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) GetPool(w http.ResponseWriter, r *http.Request, name string) {
	ctx := r.Context()
	p, err := s.st.GetPool(ctx, name)
	if api.IsCode(err, api.CodeNotFound) {
		if v, ok := s.pools.View(name); ok {
			p, err = v.Pool, nil
		}
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out, err := s.poolAnswer(ctx, p)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) CreatePool(w http.ResponseWriter, r *http.Request) {
	var spec PoolSpec
	if err := decodeJSON(r, &spec, false); err != nil {
		s.writeError(w, r, err)
		return
	}
	p := specToPool(spec)
	if err := s.validatePool(p); err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := s.checkKind(p.Adapter); err != nil {
		s.writeError(w, r, err)
		return
	}
	ctx := r.Context()
	if err := s.checkConfig(ctx, p); err != nil {
		s.writeError(w, r, err)
		return
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
		s.writeError(w, r, err)
		return
	}
	s.refresh(ctx)
	s.waker.Notify()
	out, err := s.poolAnswer(ctx, stored)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, out)
}

// apiPool is the stored pool name, or an error when there is none or when it is
// the config file's, which the API may not change or delete.
func (s *Server) apiPool(ctx context.Context, name string) (store.Pool, error) {
	p, err := s.st.GetPool(ctx, name)
	if err == nil && p.Source == store.PoolFromConfig {
		return p, store.ConfigPool(name)
	}
	return p, err
}

// updatePool applies change to the stored pool under optimistic concurrency: the write
// fails with 409 if another writer changed the pool since it was read. A config
// file's pool is refused with 409 before anything else: the next start would write
// the file's definition back, so the change would last only until then. A start
// that takes a pool over between the read and the write bumps its version, so the
// write loses.
func (s *Server) updatePool(w http.ResponseWriter, r *http.Request, name string, change func(cur store.Pool) (store.Pool, error)) {
	ctx := r.Context()
	cur, err := s.apiPool(ctx, name)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	next, err := change(cur)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	next.Name, next.Version, next.CreatedAt, next.Source = cur.Name, cur.Version, cur.CreatedAt, cur.Source
	if err := s.validatePool(next); err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := s.checkConfig(ctx, next); err != nil {
		s.writeError(w, r, err)
		return
	}
	stored, err := s.st.UpdatePool(ctx, s.now(), next)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.refresh(ctx)
	s.waker.Notify()
	out, err := s.poolAnswer(ctx, stored)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if pools.RebuildsAdapter(cur, stored) {
		// Said in the answer: an adapter holding its instances in memory lost them.
		out.AdapterRebuilt = ptr(true)
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) PutPool(w http.ResponseWriter, r *http.Request, name string) {
	var spec PoolSpec
	if err := decodeJSON(r, &spec, false); err != nil {
		s.writeError(w, r, err)
		return
	}
	s.updatePool(w, r, name, func(cur store.Pool) (store.Pool, error) {
		if spec.Name != cur.Name {
			return cur, invalid("a pool cannot be renamed (%q in the body, %q in the path)", spec.Name, cur.Name)
		}
		if spec.Adapter != cur.Adapter {
			return cur, invalid("a pool's adapter cannot change (%q to %q); create a new pool", cur.Adapter, spec.Adapter)
		}
		return specToPool(spec), nil
	})
}

func (s *Server) PatchPool(w http.ResponseWriter, r *http.Request, name string) {
	var patch PoolPatch
	if err := decodeJSON(r, &patch, false); err != nil {
		s.writeError(w, r, err)
		return
	}
	s.updatePool(w, r, name, func(p store.Pool) (store.Pool, error) {
		if patch.Trust != nil {
			p.Trust = api.Trust(*patch.Trust)
		}
		if patch.Region != nil {
			p.Region = *patch.Region
		}
		if patch.MaxConcurrency != nil {
			p.MaxConcurrency = *patch.MaxConcurrency
		}
		if patch.MaxStarting != nil {
			p.MaxStarting = *patch.MaxStarting
		}
		if c := patch.CostModel; c != nil {
			if c.CpuHour != nil {
				p.CostModel.CPUHour = *c.CpuHour
			}
			if c.MemoryGiBHour != nil {
				p.CostModel.MemoryGiBHour = *c.MemoryGiBHour
			}
		}
		if patch.Config != nil {
			p.Config = *patch.Config
		}
		if patch.Credentials != nil {
			p.CredentialsEnv = deref(patch.Credentials.Env)
		}
		if patch.Features != nil {
			p.Features = *patch.Features
		}
		return p, nil
	})
}

// DeletePool removes a pool. Its sandboxes' instances can only be deleted through the
// pool's adapter, so the pool stays until none is left: without force a pool with
// sandboxes is 409; with force=true every live sandbox is marked terminating and the
// scheduler is woken, and the delete answers 409 (details.terminating) until the
// scheduler has finished them, then 204. An operator retries the same call. A config
// file's pool is refused first, forced or not, so that nothing of it is terminated
// for a delete that cannot happen; the store refuses it again under the delete's lock.
func (s *Server) DeletePool(w http.ResponseWriter, r *http.Request, name string, params DeletePoolParams) {
	ctx := r.Context()
	if _, err := s.apiPool(ctx, name); err != nil {
		s.writeError(w, r, err)
		return
	}
	n, err := s.poolSandboxes(ctx, name)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if n > 0 && !deref(params.Force) {
		s.writeError(w, r, conflict("pool has %d sandboxes; use force=true to terminate them", n).WithDetail("sandboxes", n))
		return
	}
	if n > 0 {
		if err := s.terminatePool(ctx, name); err != nil {
			s.writeError(w, r, err)
			return
		}
		s.waker.Notify()
		if n, err = s.poolSandboxes(ctx, name); err != nil {
			s.writeError(w, r, err)
			return
		}
		if n > 0 {
			s.writeError(w, r, conflict("terminating %d sandboxes; retry the delete when they are gone", n).
				WithDetail("terminating", n))
			return
		}
	}
	if err := s.emptyBackend(ctx, name, deref(params.Force)); err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := s.st.DeletePool(ctx, name); err != nil {
		s.writeError(w, r, err)
		return
	}
	s.refresh(ctx)
	w.WriteHeader(http.StatusNoContent)
}

// poolCallTimeout bounds each backend call a pool delete makes.
const poolCallTimeout = 60 * time.Second

// emptyBackend checks, before a pool is deleted, that its backend holds no instance
// of this installation: once the pool is gone nothing would ever delete one (the
// reconciler lists only the pools it knows). Such instances are orphans (a sandbox
// failed while its Delete kept failing, say); forced, they are deleted here. A pool
// whose backend cannot be listed (no adapter, the List fails) is deleted as before:
// nothing could delete its instances either way, and refusing would keep a pool
// whose backend is gone for good.
func (s *Server) emptyBackend(ctx context.Context, name string, force bool) error {
	v, ok := s.pools.View(name)
	if !ok || v.Adapter == nil {
		return nil
	}
	lctx, cancel := context.WithTimeout(ctx, poolCallTimeout)
	insts, err := v.Adapter.List(lctx, s.inst)
	cancel()
	switch {
	case err != nil:
		s.log.Warn("deleting a pool whose instances could not be listed", "pool", name, "error", err)
		return nil
	case len(insts) == 0:
		return nil
	case !force:
		return conflict("the backend of pool %s still holds %d instances of this installation, which the reconciler deletes as orphans in its next pass; retry then, or use force=true to delete them with the pool now", name, len(insts)).
			WithDetail("instances", len(insts))
	}
	left := 0
	for _, inst := range insts {
		dctx, cancel := context.WithTimeout(ctx, poolCallTimeout)
		err := adapters.DeleteInstance(dctx, v.Adapter, inst.Ref)
		cancel()
		if err != nil {
			s.log.Warn("delete instance of a pool being deleted", "pool", name, "ref", inst.Ref, "error", err)
			left++
		}
	}
	if left > 0 {
		return conflict("%d instances of pool %s could not be deleted; retry the delete", left, name).WithDetail("instances", left)
	}
	return nil
}

func (s *Server) poolSandboxes(ctx context.Context, name string) (int, error) {
	counts, err := s.st.CountSandboxesByPool(ctx, store.NonTerminalStates)
	if err != nil {
		return 0, errorf("count sandboxes: %w", err)
	}
	return counts[name], nil
}

// terminatePool marks every live sandbox of the pool terminating, a page at a time.
func (s *Server) terminatePool(ctx context.Context, name string) error {
	cursor := ""
	for {
		page, next, err := s.st.ListSandboxes(ctx, store.SandboxFilter{Pool: name, States: liveStates, Cursor: cursor, Limit: store.MaxLimit})
		if err != nil {
			return errorf("list sandboxes of pool %s: %w", name, err)
		}
		for _, sb := range page {
			_, err := s.updateSandbox(ctx, sb.ID, func(cur *store.Sandbox) error {
				if cur.State.IsTerminal() || cur.State == store.StateTerminating || cur.Pool != name {
					return errUnchanged
				}
				return lifecycle.Terminate(cur, "pool "+name+" is being deleted", s.now(), actor(ctx))
			})
			if err != nil && !errors.Is(err, errUnchanged) && !api.IsCode(err, api.CodeNotFound) {
				return errorf("terminate sandbox %s: %w", sb.ID, err)
			}
		}
		if next == "" {
			return nil
		}
		cursor = next
	}
}
