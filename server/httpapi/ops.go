package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"slices"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/server/lifecycle"
	"github.com/different-ai/differently/server/pools"
	"github.com/different-ai/differently/server/store"
)

// target is a sandbox an operation runs on and the pool view it runs through.
type target struct {
	sb   store.Sandbox
	view pools.View
}

// poolView returns the view of a pool whose adapter can be called now. Why an
// adapter could not be built is told to administrators only: the error may name the
// pool's internal endpoints, paths or credential variables, which are not a
// tenant's to know (they see it nowhere else either).
func (s *Server) poolView(ctx context.Context, name string) (pools.View, error) {
	v, ok := s.pools.View(name)
	if !ok {
		return v, api.Errorf(api.CodeProviderUnavailable, "pool %s has no adapter: not probed yet", name)
	}
	if v.Adapter == nil {
		if principalFrom(ctx).admin && v.LastError != "" {
			return v, api.Errorf(api.CodeProviderUnavailable, "pool %s has no adapter: %s", name, v.LastError)
		}
		return v, api.Errorf(api.CodeProviderUnavailable, "pool %s is unavailable: its adapter could not be built", name)
	}
	return v, nil
}

// unsupported is the seed's 501: the operation, the pool and its adapter kind in the
// details, so a client can tell "this pool cannot" from "this sandbox is broken".
func unsupported(op string, v pools.View) *api.Error {
	return (&api.Error{
		Code:    api.CodeUnsupportedOperation,
		Message: fmt.Sprintf("%s is not supported by pool %s (adapter %s)", op, v.Pool.Name, v.Pool.Adapter),
	}).WithDetail("operation", op).WithDetail("pool", v.Pool.Name).WithDetail("adapter", v.Pool.Adapter)
}

// adapterError adds the pool and adapter to an adapter's own unsupported_operation,
// so that it reads like the API's.
func adapterError(err error, op string, v pools.View) error {
	if api.IsCode(err, api.CodeUnsupportedOperation) {
		return unsupported(op, v)
	}
	return err
}

// operate loads a sandbox for an operation: the caller must see it, it must be in one
// of states, its pool must have an adapter and, for an optional operation, advertise
// feature. The caller then type-asserts the optional interface with optional.
func (s *Server) operate(ctx context.Context, id, op, feature string, states ...store.State) (target, error) {
	sb, err := s.loadSandbox(ctx, id)
	if err != nil {
		return target{}, err
	}
	if !slices.Contains(states, sb.State) {
		return target{}, conflict("sandbox is %s", sb.State).WithDetail("state", string(sb.State))
	}
	return s.operateOn(ctx, sb, op, feature)
}

func (s *Server) operateOn(ctx context.Context, sb store.Sandbox, op, feature string) (target, error) {
	v, err := s.poolView(ctx, sb.Pool)
	if err != nil {
		return target{}, err
	}
	if feature != "" && !v.Supports(feature) {
		return target{}, unsupported(op, v)
	}
	return target{sb: sb, view: v}, nil
}

// optional asserts the interface behind an optional operation. A pool that advertises
// a feature its adapter cannot serve is a wiring bug, answered like a missing feature.
func optional[I any](t target, op string) (I, error) {
	i, ok := t.view.Adapter.(I)
	if !ok {
		return i, unsupported(op, t.view)
	}
	return i, nil
}

// runLifecycle answers a stop, start, pause or resume: the service's Operate.
func (s *Server) runLifecycle(w http.ResponseWriter, r *http.Request, id string, op lifecycle.Op) {
	ctx := r.Context()
	out, err := s.svc.Operate(ctx, callerOf(ctx), id, op)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, s.toSandbox(out))
}

func (s *Server) StopSandbox(w http.ResponseWriter, r *http.Request, id SandboxID) {
	s.runLifecycle(w, r, id, lifecycle.OpStop)
}

func (s *Server) StartSandbox(w http.ResponseWriter, r *http.Request, id SandboxID) {
	s.runLifecycle(w, r, id, lifecycle.OpStart)
}

func (s *Server) PauseSandbox(w http.ResponseWriter, r *http.Request, id SandboxID) {
	s.runLifecycle(w, r, id, lifecycle.OpPause)
}

func (s *Server) ResumeSandbox(w http.ResponseWriter, r *http.Request, id SandboxID) {
	s.runLifecycle(w, r, id, lifecycle.OpResume)
}

func (s *Server) ExposeSandboxPort(w http.ResponseWriter, r *http.Request, id SandboxID) {
	var body PortRequest
	if err := decodeJSON(r, &body, false); err != nil {
		s.writeError(w, r, err)
		return
	}
	if body.Port < 1 || body.Port > 65535 {
		s.writeError(w, r, invalid("port must be between 1 and 65535"))
		return
	}
	ctx := r.Context()
	const op = "ports.expose"
	t, err := s.operate(ctx, id, op, adapters.FeaturePortsExpose, store.StateRunning)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	pe, err := optional[adapters.PortExposer](t, op)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	url, err := pe.ExposePort(ctx, t.sb.BackendRef, body.Port)
	if err != nil {
		s.writeError(w, r, adapterError(err, op, t.view))
		return
	}
	writeJSON(w, http.StatusOK, PortResponse{Url: url})
}
