// Package httpapi serves the daemon's public and admin HTTP API. The routes, parameters
// and models come from api/openapi.yaml through oapi-codegen (gen.go); this package
// implements the generated ServerInterface and adds what the document cannot say:
// authentication and tenancy, body limits, error mapping, metrics and panic recovery.
//
// A sandbox or profile route decodes its request, calls the sandbox service
// (server/sandboxes) with the caller's identity, and encodes what comes back; the
// service holds the application logic (validation, placement, admission, the
// scheduler's direct work, adapter calls). The admin pool routes do the same with
// the pool service (server/pooladmin). imports_test.go keeps it that way.
package httpapi

import (
	"go.opentelemetry.io/otel/trace"

	"cmp"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/internal/clock"
	"github.com/different-ai/differently/server/changes"
	"github.com/different-ai/differently/server/pooladmin"
	"github.com/different-ai/differently/server/pools"
	"github.com/different-ai/differently/server/reconcile"
	"github.com/different-ai/differently/server/sandboxes"
	"github.com/different-ai/differently/server/store"
)

// PoolSource is the pool manager as the API sees it: the current views and a way to
// rebuild them at once after an admin changed a pool.
type PoolSource interface {
	// Views returns every pool's current view.
	Views() []pools.View
	// View returns one pool's view, false when the pool has none (yet).
	View(name string) (pools.View, bool)
	// Refresh rebuilds and probes the views from the store now.
	Refresh(ctx context.Context) error
}

// Waker wakes the scheduler so that queued or terminating sandboxes are handled now
// rather than at its next tick.
type Waker interface {
	// Notify wakes every loop (a pool or the policy changed).
	Notify()
	// Wake wakes the loop that acts on sandboxes entering state.
	Wake(state store.State)
}

// Direct is the replica's scheduler, to which the sandbox service hands a new
// sandbox or a deletion at once when it can, instead of leaving it for a pass. It is
// the service's type (server/sandboxes/service.go), named here too so that the
// daemon's wiring of Options reads as before.
type Direct = sandboxes.Direct

// Reconciler runs one reconcile pass on demand (POST /v1/admin/reconcile).
type Reconciler interface {
	ReconcileBy(ctx context.Context, tokenID string) (reconcile.Report, error)
}

// Options wires the API to the rest of the daemon.
type Options struct {
	// Store is required.
	Store store.Store
	// Pools is required.
	Pools PoolSource
	// Scheduler is woken after changes it must act on; nil means nobody is woken (the
	// scheduler then finds the work on its next tick).
	Scheduler Waker
	// Direct takes new sandboxes and deletions straight from the API when it can;
	// nil leaves all of them to the scheduler's passes.
	Direct Direct
	// WaitRecheck is how often a wait reads its sandbox again without a wake-up
	// (DefaultWaitRecheck when 0): a replica that dies between its commit and its
	// NOTIFY leaves a change nobody hears, and the read finds it.
	WaitRecheck time.Duration
	// Writes is the replica's group commit, shared with the scheduler: the API's
	// changes of a sandbox go through it. nil: each is a transaction of its own.
	Writes *store.Batcher
	// Changes is the replica's change hub, fed by the store's change feed: the wait
	// route wakes on it, and the token and policy caches are dropped on its token,
	// policy and resync changes. Required.
	Changes *changes.Hub
	// Reconciler may be nil: POST /v1/admin/reconcile then answers 503
	// provider_unavailable, because no pass can run on this replica.
	Reconciler Reconciler
	// Clock defaults to the system clock.
	Clock clock.Clock
	// Installation is this database's installation ID, stamped on adapter requests.
	Installation string
	// AdapterKinds lists the adapter kinds this build can run; a pool create naming
	// another kind is refused. Nil means no kind is known, so every pool create is
	// refused.
	AdapterKinds func() []string
	// DevOnlyKinds are refused for new pools unless Dev is set.
	DevOnlyKinds []string
	// CheckPoolConfig checks a pool's adapter config before a create or update
	// stores it (pools.Registry.CheckConfig): a config its adapter would refuse is
	// 400 invalid_request naming the key, not a pool that can never be built. Nil
	// checks nothing.
	CheckPoolConfig func(ctx context.Context, kind string, cfg map[string]any) error
	// AllowedCredentialsEnv is the operator's allowlist of the variables a pool's
	// credentials.env may name; a create or update naming another is 400. The zero
	// value is no list (api.CheckCredentialsEnv alone).
	AllowedCredentialsEnv api.EnvAllowlist
	Dev                   bool
	// MaxQueued bounds the queued sandboxes (all projects): a create finding that many
	// waiting answers 503 provider_unavailable with Retry-After. 0 means
	// sandboxes.DefaultMaxQueued.
	MaxQueued int
	// UploadReadTimeout bounds the reading of a file upload's body. 0 means
	// DefaultUploadReadTimeout.
	UploadReadTimeout time.Duration
	// TransferStallTimeout is how long a file download may wait for its client to
	// take the next piece, and an upload for its body's next bytes; past it the
	// transfer fails and its slot is freed. 0 means DefaultTransferStallTimeout.
	TransferStallTimeout time.Duration
	// MaxTransfers and MaxProjectTransfers bound the file transfers larger than
	// LargeTransferBytes (or of unknown size) in flight, in all and per project; one
	// more answers 503 with Retry-After. 0 means the sandbox service's Default of each.
	MaxTransfers        int
	MaxProjectTransfers int
	LargeTransferBytes  int64
	// BodyReadTimeout bounds the reading of any other request's body (JSON, at most
	// 4 MiB). 0 means DefaultBodyReadTimeout.
	BodyReadTimeout time.Duration
	// AccessLog logs every request at Info: method, path, route, status, duration,
	// remote address and User-Agent.
	AccessLog bool
	// Logger defaults to one that discards.
	Logger *slog.Logger
	// Metrics receives the HTTP metrics; nil means a fresh registry. /metrics serves
	// Gatherer, or Metrics itself when it is also a Gatherer (a *prometheus.Registry).
	Metrics  prometheus.Registerer
	Gatherer prometheus.Gatherer
	// FrontDoors are served under their prefixes instead of this API's routes, with
	// this API's sandbox service and token check (frontdoor.go). Nil serves none.
	FrontDoors []FrontDoor
	// Tracer, when set, makes a span of every request (continuing a trace whose
	// traceparent the request carries) and of the sandbox service's steps; nil makes
	// none.
	Tracer trace.Tracer
	// OnWarmClaim and WarmObserver are the sandbox service's
	// (sandboxes.Options): the warm-pool filler's wake-up and metrics.
	OnWarmClaim  func(pool string)
	WarmObserver func(pool string, shape store.WarmShape, o sandboxes.WarmOutcome, took time.Duration)
	// Service, when set, is given the sandbox service New builds, for the parts of
	// the daemon that create and delete sandboxes themselves (the warm-pool filler).
	Service func(*sandboxes.Service)
}

// Server implements the generated ServerInterface.
type Server struct {
	st       store.Store
	pools    PoolSource
	waker    Waker
	recheck  time.Duration
	changes  *changes.Hub
	rec      Reconciler
	clock    clock.Clock
	log      *slog.Logger
	gatherer prometheus.Gatherer
	metrics  *httpMetrics
	touches  touchCache
	cache    caches
	// svc is the sandbox service: the application logic behind the sandbox routes,
	// for which this package decodes requests and encodes answers.
	svc *sandboxes.Service
	// poolSvc is the pool service, behind the admin pool routes.
	poolSvc *pooladmin.Service
	// uploadTimeout bounds the reading of a file upload's body, bodyTimeout that of
	// any other body.
	uploadTimeout time.Duration
	bodyTimeout   time.Duration
	accessLog     bool
	tracer        trace.Tracer
	router        *chi.Mux
	// doors are the prefixes of the front doors (frontdoor.go).
	doors []string

	// stallTimeout bounds each write of a file download, and each wait for an
	// upload's next bytes.
	stallTimeout time.Duration
}

// Every operation is implemented: the compiler proves the routes are covered.
var _ ServerInterface = (*Server)(nil)

type nopWaker struct{}

func (nopWaker) Notify()          {}
func (nopWaker) Wake(store.State) {}

// New builds the API's handler: a chi router with the generated routes and the
// middlewares every request passes (metrics, panic recovery, authentication, body
// limits).
func New(opts Options) (http.Handler, error) {
	if opts.Store == nil || opts.Pools == nil || opts.Changes == nil {
		return nil, errors.New("httpapi: Options.Store, Options.Pools and Options.Changes are required")
	}
	s := &Server{
		st: opts.Store, pools: opts.Pools, waker: opts.Scheduler, recheck: opts.WaitRecheck, rec: opts.Reconciler,
		clock: opts.Clock, log: opts.Logger,
	}
	if s.waker == nil {
		s.waker = nopWaker{}
	}
	if s.recheck <= 0 {
		s.recheck = DefaultWaitRecheck
	}
	s.changes = opts.Changes
	// The hub lives as long as the daemon, and so does this server: nothing to stop.
	s.changes.Listen(s.cache.onChange)
	s.uploadTimeout = cmp.Or(opts.UploadReadTimeout, DefaultUploadReadTimeout)
	s.bodyTimeout = cmp.Or(opts.BodyReadTimeout, DefaultBodyReadTimeout)
	s.stallTimeout = cmp.Or(opts.TransferStallTimeout, DefaultTransferStallTimeout)
	s.accessLog = opts.AccessLog
	s.tracer = opts.Tracer
	if s.clock == nil {
		s.clock = clock.Real{}
	}
	if s.log == nil {
		s.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	svc, err := sandboxes.New(sandboxes.Options{
		Store: s.st, Pools: s.pools, Waker: s.waker, Direct: opts.Direct, Writes: opts.Writes,
		// The service reads the policy through this server's cache, which the
		// change feed keeps fresh (cache.go).
		Policy: s.policy, MaxQueued: opts.MaxQueued,
		MaxTransfers: opts.MaxTransfers, MaxProjectTransfers: opts.MaxProjectTransfers,
		LargeTransferBytes: opts.LargeTransferBytes, Clock: s.clock, Logger: s.log,
		Tracer: opts.Tracer, OnWarmClaim: opts.OnWarmClaim, WarmObserver: opts.WarmObserver,
	})
	if err != nil {
		return nil, err
	}
	s.svc = svc
	if opts.Service != nil {
		opts.Service(svc)
	}
	poolSvc, err := pooladmin.New(pooladmin.Options{
		Store: s.st, Pools: s.pools, Scheduler: s.waker, Writes: opts.Writes, Installation: opts.Installation,
		AdapterKinds: opts.AdapterKinds, DevOnlyKinds: opts.DevOnlyKinds, Dev: opts.Dev,
		CheckConfig: opts.CheckPoolConfig, AllowedCredentialsEnv: opts.AllowedCredentialsEnv,
		Clock: s.clock, Logger: s.log,
	})
	if err != nil {
		return nil, err
	}
	s.poolSvc = poolSvc
	reg, gat := opts.Metrics, opts.Gatherer
	if reg == nil {
		fresh := prometheus.NewRegistry()
		reg = fresh
		if gat == nil {
			gat = fresh
		}
	}
	if gat == nil {
		g, ok := reg.(prometheus.Gatherer)
		if !ok {
			return nil, errors.New("httpapi: Options.Metrics is not a Gatherer; set Options.Gatherer")
		}
		gat = g
	}
	s.gatherer = gat
	m, err := newHTTPMetrics(reg)
	if err != nil {
		return nil, err
	}
	s.metrics = m

	r := chi.NewRouter()
	s.router = r
	r.Use(s.instrument, s.recoverer, s.checkSize, s.authenticate, s.limitBody, s.checkText)
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		s.writeError(w, r, errNoRoute(r))
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
		// No code maps to 405; invalid_request is what a client should make of it.
		writeJSON(w, http.StatusMethodNotAllowed, api.ErrorEnvelope{Error: errMethod(r)})
	})
	HandlerWithOptions(s, ChiServerOptions{BaseRouter: r, ErrorHandlerFunc: s.paramError})
	return s.withFrontDoors(r, opts.FrontDoors)
}

// now is the clock's time; every stored timestamp comes from here.
func (s *Server) now() time.Time { return s.clock.Now() }
