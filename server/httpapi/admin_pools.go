package httpapi

import (
	"net/http"
	"time"

	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/server/pooladmin"
	"github.com/different-ai/differently/server/store"
)

// The pool routes: the checks, the store writes and the forced delete are the pool
// service's (server/pooladmin).

// specToPool builds a pool definition from a full spec; trust defaults to private.
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
	if spec.Warm != nil {
		p.Warm = fromWarm(*spec.Warm)
	}
	return p
}

// poolAnswer is the pool as GET shows it, with this replica's view and sandbox count.
func poolAnswer(p pooladmin.Pool) Pool {
	out := toPool(p.Pool, p.View, p.Sandboxes)
	if len(p.Pool.Warm) > 0 {
		out.Warm = ptr(toWarm(p.Pool.Warm))
		status := make([]WarmStatus, len(p.Warm))
		for i, w := range p.Warm {
			status[i] = WarmStatus{Template: w.Shape.Template, Profile: w.Shape.Profile, Resources: w.Shape.Resources,
				Target: w.Shape.Size, Ready: w.Ready, Starting: w.Starting, Hits: w.Stats.Hits, Misses: w.Stats.Misses}
			if d, ok := w.Stats.ClaimQuantile(0.50); ok {
				status[i].ClaimP50Ms = ptr(milliseconds(d))
			}
			if d, ok := w.Stats.ClaimQuantile(0.99); ok {
				status[i].ClaimP99Ms = ptr(milliseconds(d))
			}
		}
		out.WarmStatus = &status
	}
	return out
}

// milliseconds is d in milliseconds, to the microsecond.
func milliseconds(d time.Duration) float64 {
	return float64(d.Microseconds()) / 1000
}

func fromWarm(in []WarmShape) []store.WarmShape {
	out := make([]store.WarmShape, len(in))
	for i, w := range in {
		out[i] = store.WarmShape{Template: deref(w.Template), Profile: deref(w.Profile), Resources: deref(w.Resources),
			Size: w.Size, MaxAgeSeconds: deref(w.MaxAgeSeconds)}
	}
	return out
}

func toWarm(in []store.WarmShape) []WarmShape {
	out := make([]WarmShape, len(in))
	for i, w := range in {
		out[i] = WarmShape{Template: strPtr(w.Template), Profile: strPtr(w.Profile), Resources: ptr(w.Resources),
			Size: w.Size, MaxAgeSeconds: ptr(w.MaxAgeSeconds)}
	}
	return out
}

func (s *Server) ListPools(w http.ResponseWriter, r *http.Request) {
	ps, err := s.poolSvc.List(r.Context())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := PoolList{Items: make([]Pool, 0, len(ps))}
	for _, p := range ps {
		out.Items = append(out.Items, poolAnswer(p))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) GetPool(w http.ResponseWriter, r *http.Request, name string) {
	p, err := s.poolSvc.Get(r.Context(), name)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, poolAnswer(p))
}

func (s *Server) CreatePool(w http.ResponseWriter, r *http.Request) {
	var spec PoolSpec
	if err := decodeJSON(r, &spec, false); err != nil {
		s.writeError(w, r, err)
		return
	}
	p, err := s.poolSvc.Create(r.Context(), specToPool(spec))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, poolAnswer(p))
}

// writeUpdated answers a pool update.
func (s *Server) writeUpdated(w http.ResponseWriter, r *http.Request, p pooladmin.Pool, rebuilt bool, err error) {
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := poolAnswer(p)
	if rebuilt {
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
	p, rebuilt, err := s.poolSvc.Replace(r.Context(), name, specToPool(spec))
	s.writeUpdated(w, r, p, rebuilt, err)
}

func (s *Server) PatchPool(w http.ResponseWriter, r *http.Request, name string) {
	var patch PoolPatch
	if err := decodeJSON(r, &patch, false); err != nil {
		s.writeError(w, r, err)
		return
	}
	p, rebuilt, err := s.poolSvc.Update(r.Context(), name, func(p store.Pool) (store.Pool, error) {
		return applyPoolPatch(p, patch), nil
	})
	s.writeUpdated(w, r, p, rebuilt, err)
}

// applyPoolPatch sets the fields patch names and keeps the others.
func applyPoolPatch(p store.Pool, patch PoolPatch) store.Pool {
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
	if patch.Warm != nil {
		p.Warm = fromWarm(*patch.Warm)
	}
	return p
}

// DeletePool answers 204 once the pool is gone, and 409 while its sandboxes or
// instances keep it (pooladmin.Service.Delete says when); an operator retries the
// same call.
func (s *Server) DeletePool(w http.ResponseWriter, r *http.Request, name string, params DeletePoolParams) {
	ctx := r.Context()
	if err := s.poolSvc.Delete(ctx, callerOf(ctx), name, deref(params.Force)); err != nil {
		s.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
