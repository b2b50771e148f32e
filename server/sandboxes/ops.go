package sandboxes

import (
	"context"
	"fmt"
	"slices"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/server/apierr"
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
func (s *Service) poolView(c Caller, name string) (pools.View, error) {
	v, ok := s.pools.View(name)
	if !ok {
		return v, api.Errorf(api.CodeProviderUnavailable, "pool %s has no adapter: not probed yet", name)
	}
	if v.Adapter == nil {
		if c.Admin && v.LastError != "" {
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
// so that it reads like the service's.
func adapterError(err error, op string, v pools.View) error {
	if api.IsCode(err, api.CodeUnsupportedOperation) {
		return unsupported(op, v)
	}
	return err
}

// operate loads a sandbox for an operation: the caller must see it, it must be in one
// of states, its pool must have an adapter and, for an optional operation, advertise
// feature. The caller then type-asserts the optional interface with optional.
func (s *Service) operate(ctx context.Context, c Caller, id, op, feature string, states ...store.State) (target, error) {
	sb, err := s.Sandbox(ctx, c, id)
	if err != nil {
		return target{}, err
	}
	if !slices.Contains(states, sb.State) {
		return target{}, apierr.Conflict("sandbox is %s", sb.State).WithDetail("state", string(sb.State))
	}
	return s.operateOn(c, sb, op, feature)
}

func (s *Service) operateOn(c Caller, sb store.Sandbox, op, feature string) (target, error) {
	v, err := s.poolView(c, sb.Pool)
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

// action is the adapter's side of one of stop, start, pause and resume.
type action struct {
	feature string
	call    func(ctx context.Context, a adapters.ExecutionAdapter, ref string) error
}

var actions = map[lifecycle.Op]action{
	lifecycle.OpStop: {adapters.FeatureStopStart,
		func(ctx context.Context, a adapters.ExecutionAdapter, ref string) error {
			return call(a, "stop", func(l adapters.Lifecycle) error { return l.Stop(ctx, ref) })
		}},
	lifecycle.OpStart: {adapters.FeatureStopStart,
		func(ctx context.Context, a adapters.ExecutionAdapter, ref string) error {
			return call(a, "start", func(l adapters.Lifecycle) error { return l.Start(ctx, ref) })
		}},
	lifecycle.OpPause: {adapters.FeaturePauseResume,
		func(ctx context.Context, a adapters.ExecutionAdapter, ref string) error {
			return call(a, "pause", func(p adapters.Pauser) error { return p.Pause(ctx, ref) })
		}},
	lifecycle.OpResume: {adapters.FeaturePauseResume,
		func(ctx context.Context, a adapters.ExecutionAdapter, ref string) error {
			return call(a, "resume", func(p adapters.Pauser) error { return p.Resume(ctx, ref) })
		}},
}

func call[I any](a adapters.ExecutionAdapter, op string, fn func(I) error) error {
	i, ok := a.(I)
	if !ok {
		return adapters.Unsupported(op)
	}
	return fn(i)
}

// Operate carries out a lifecycle action (stop, start, pause, resume) on the backend
// and records it with lifecycle.Operate. Asking for the state the sandbox is already
// in succeeds without calling the adapter, as the adapter contract's calls are
// idempotent too.
func (s *Service) Operate(ctx context.Context, c Caller, id string, op lifecycle.Op) (store.Sandbox, error) {
	lc, ok := actions[op]
	if !ok {
		return store.Sandbox{}, fmt.Errorf("unknown lifecycle action %q", op)
	}
	sb, err := s.Sandbox(ctx, c, id)
	if err != nil {
		return store.Sandbox{}, err
	}
	if sb.State == op.To() {
		return sb, nil
	}
	if sb.State != op.From() {
		return store.Sandbox{}, apierr.Conflict("cannot %s a sandbox that is %s", op, sb.State).WithDetail("state", string(sb.State))
	}
	t, err := s.operateOn(c, sb, string(op), lc.feature)
	if err != nil {
		return store.Sandbox{}, err
	}
	if err := lc.call(ctx, t.view.Adapter, sb.BackendRef); err != nil {
		return store.Sandbox{}, adapterError(err, string(op), t.view)
	}
	return s.update(ctx, id, func(cur *store.Sandbox) error {
		// Another request (a delete, the reconciler) moved the sandbox while the
		// backend worked; its state wins and the caller hears about the conflict.
		if cur.State != op.From() || cur.BackendRef != sb.BackendRef {
			return apierr.Conflict("sandbox changed to %s during %s", cur.State, op).WithDetail("state", string(cur.State))
		}
		return lifecycle.Operate(cur, op, c.Actor())
	})
}

// ExposePort makes a guest port of a running sandbox reachable and returns its URL.
func (s *Service) ExposePort(ctx context.Context, c Caller, id string, port int) (string, error) {
	if port < 1 || port > 65535 {
		return "", apierr.Invalid("port must be between 1 and 65535")
	}
	const op = "ports.expose"
	t, err := s.operate(ctx, c, id, op, adapters.FeaturePortsExpose, store.StateRunning)
	if err != nil {
		return "", err
	}
	pe, err := optional[adapters.PortExposer](t, op)
	if err != nil {
		return "", err
	}
	url, err := pe.ExposePort(ctx, t.sb.BackendRef, port)
	if err != nil {
		return "", adapterError(err, op, t.view)
	}
	return url, nil
}
