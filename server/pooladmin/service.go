// Package pooladmin is what an admin does to the pools through the API, without the
// HTTP: it checks a pool definition the way the config file's pools are checked
// (name, trust, limits, the operator's credentials allowlist, declared features,
// adapter kind and config), stores it, and rebuilds the pool views so that the
// answer and the next placement see the change. server/httpapi decodes a request,
// calls a Service method with plain Go values and encodes what comes back; every
// error a method returns is an *api.Error (or wraps one, or is internal), which
// server/httpapi/errors.go maps to an HTTP answer.
//
// A pool's sandboxes' instances can only be deleted through the pool's adapter, so
// a delete (Delete, delete.go) waits for them: it ends the pool's live sandboxes
// through server/lifecycle, lets the scheduler delete their instances, and deletes
// whatever the backend still holds of this installation before the pool goes.
package pooladmin

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"time"

	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/internal/clock"
	"github.com/different-ai/differently/server/pools"
	"github.com/different-ai/differently/server/store"
)

// Pools is the pool manager as the service sees it: the current views, and a way to
// rebuild them at once after a change.
type Pools interface {
	// Views returns every pool's current view.
	Views() []pools.View
	// View returns one pool's view, false when the pool has none (yet).
	View(name string) (pools.View, bool)
	// Refresh rebuilds and probes the views from the store now.
	Refresh(ctx context.Context) error
}

// Notifier wakes every scheduler loop: a pool changed, so queued sandboxes may fit
// now, and a pool being deleted has sandboxes to terminate.
type Notifier interface {
	Notify()
}

// Options wires the service to the rest of the daemon.
type Options struct {
	// Store and Pools are required.
	Store store.Store
	Pools Pools
	// Scheduler is woken after a change; nil wakes nobody (the scheduler then finds
	// the work on its next tick).
	Scheduler Notifier
	// Writes is the replica's group commit, shared with the scheduler: the
	// terminations of a pool's sandboxes go through it. nil: each is a transaction
	// of its own.
	Writes *store.Batcher
	// Installation is this database's installation ID: the instances a pool delete
	// looks for in the pool's backend are those stamped with it.
	Installation string
	// AdapterKinds lists the adapter kinds this build can run; a create naming
	// another kind is refused. Nil means no kind is known, so every create is
	// refused.
	AdapterKinds func() []string
	// DevOnlyKinds are refused for new pools unless Dev is set.
	DevOnlyKinds []string
	Dev          bool
	// CheckConfig checks a pool's adapter config before a create or update stores it
	// (pools.Registry.CheckConfig). Nil checks nothing.
	CheckConfig func(ctx context.Context, kind string, cfg map[string]any) error
	// AllowedCredentialsEnv is the operator's allowlist of the variables a pool's
	// credentials.env may name. The zero value is no list (api.CheckCredentialsEnv
	// alone).
	AllowedCredentialsEnv api.EnvAllowlist
	// Clock defaults to the system clock.
	Clock clock.Clock
	// Logger defaults to one that discards.
	Logger *slog.Logger
}

// Service carries out the admin API's operations on pools.
type Service struct {
	st       store.Store
	pools    Pools
	sched    Notifier
	writes   *store.Batcher
	inst     string
	kinds    func() []string
	devOnly  []string
	dev      bool
	checkCfg func(ctx context.Context, kind string, cfg map[string]any) error
	allowed  api.EnvAllowlist
	clock    clock.Clock
	log      *slog.Logger
}

type nopNotifier struct{}

func (nopNotifier) Notify() {}

// New builds a service from opts.
func New(opts Options) (*Service, error) {
	if opts.Store == nil || opts.Pools == nil {
		return nil, errors.New("pooladmin: Options.Store and Options.Pools are required")
	}
	s := &Service{
		st: opts.Store, pools: opts.Pools, sched: opts.Scheduler, writes: opts.Writes,
		inst: opts.Installation, kinds: opts.AdapterKinds, devOnly: opts.DevOnlyKinds, dev: opts.Dev,
		checkCfg: opts.CheckConfig, allowed: opts.AllowedCredentialsEnv, clock: opts.Clock, log: opts.Logger,
	}
	if s.sched == nil {
		s.sched = nopNotifier{}
	}
	if s.kinds == nil {
		s.kinds = func() []string { return nil }
	}
	if s.clock == nil {
		s.clock = clock.Real{}
	}
	if s.log == nil {
		s.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return s, nil
}

// now is the clock's time; every timestamp the service stores comes from here.
func (s *Service) now() time.Time { return s.clock.Now() }

// refresh rebuilds the pool views after a change, so that the answer and the next
// placement see it. A failure is logged: the change is stored, and the periodic
// refresh will pick it up.
func (s *Service) refresh(ctx context.Context) {
	if err := s.pools.Refresh(ctx); err != nil {
		s.log.Warn("refresh pools after an admin change", "error", err)
	}
}
