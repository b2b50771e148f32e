// Package daemon wires the control plane together: store, pool manager, scheduler,
// reconciler and HTTP API, with one Run that serves until its context ends and then
// shuts down in order. cmd/differently-server is a thin shell around it, and the
// end-to-end tests run the very same wiring.
package daemon

import (
	"github.com/different-ai/differently/server/sandboxes"

	"github.com/different-ai/differently/server/warm"

	"github.com/different-ai/differently/internal/tracing"
	"go.opentelemetry.io/otel/trace"

	"context"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/internal/clock"
	"github.com/different-ai/differently/internal/ids"
	"github.com/different-ai/differently/internal/safeurl"
	"github.com/different-ai/differently/server/changes"
	"github.com/different-ai/differently/server/config"
	"github.com/different-ai/differently/server/console"
	"github.com/different-ai/differently/server/defaults"
	"github.com/different-ai/differently/server/e2b"
	"github.com/different-ai/differently/server/e2b/envd"
	"github.com/different-ai/differently/server/httpapi"
	"github.com/different-ai/differently/server/pools"
	"github.com/different-ai/differently/server/reconcile"
	"github.com/different-ai/differently/server/retention"
	"github.com/different-ai/differently/server/scheduler"
	"github.com/different-ai/differently/server/store"
	"github.com/different-ai/differently/server/store/open"
	"github.com/different-ai/differently/server/tokens"
)

// AdminTokenFile is the file in the data directory that holds the first admin token
// of a development installation.
const AdminTokenFile = defaults.AdminTokenFile

// Options configure a daemon.
type Options struct {
	// Dev runs the embedded default: SQLite in DataDir, the devhost and fake pools, an
	// admin token written to DataDir.
	Dev bool
	// DataDir holds the SQLite database, the devhost sandboxes and the admin token in
	// development mode.
	DataDir string
	// Listen overrides the config's listen address.
	Listen string
	// Config is the parsed and validated config file; nil in plain development mode.
	Config *config.Config
	Getenv func(string) string
	Clock  clock.Clock
	Logger *slog.Logger
	// Stdout receives the one line that shows a newly created admin token.
	Stdout io.Writer
	// ReplicaID names this replica for claims and the reconciler lease.
	ReplicaID string
	// ShutdownGrace bounds how long requests in flight may take after a stop: 30 s.
	ShutdownGrace time.Duration
	// AccessLog logs every API request at Info (httpapi.Options.AccessLog).
	AccessLog bool
	// OnSchedulerPass is called after every scheduler pass: a test hook, so tests wait
	// for work to happen instead of sleeping.
	OnSchedulerPass func(scheduler.Result)
	// TracerProvider, when set, receives spans of the API's requests, of the sandbox
	// service's steps and of the scheduler's attempts and adapter calls; nil makes
	// none (internal/tracing.FromEnv builds one from the OTEL_* variables).
	TracerProvider trace.TracerProvider
	// Adapters, when set, is called once with the registry of this build's adapter
	// kinds (pools.DefaultRegistry), before any pool is built. A custom build
	// registers its own in-process adapter kinds there, or replaces a built-in one;
	// pools of the config file and of the API can then name them. A config file
	// naming such a kind must be validated with the registry's Kinds.
	Adapters func(*pools.Registry)
}

// Daemon is one replica of the control plane.
type Daemon struct {
	opts       Options
	cfg        *config.Config
	st         store.Store
	pools      *pools.Manager
	sched      *scheduler.Scheduler
	reconciler *reconcile.Reconciler
	pruner     *retention.Pruner
	changes    *changes.Hub
	envd       *envd.Handler
	// warm keeps the pools' warm sandboxes.
	warm  *warm.Filler
	srv   *http.Server
	ln    net.Listener
	dbURL string
	lock  *dbLock
	// AdminToken is the secret of the admin token created by this start, if any.
	AdminToken string
}

// Database names the database in use for a log line, without its credentials.
func (d *Daemon) Database() string { return safeurl.Describe(d.dbURL) }

// New opens the store, registers the pools and builds every part, listening but not
// yet serving. Close releases what New took if Run is never called.
//
// The steps run in this order: the listen address and the certificate are checked
// before anything is written, so that a typo or a port in use leaves no data folder,
// database or admin token behind; the pools are registered before the manager loads
// them; the scheduler exists before the change feed that wakes it and the API that
// hands it work.
func New(ctx context.Context, opts Options) (_ *Daemon, err error) {
	opts = opts.withDefaults()
	// d stays set when New fails (the results are nil then), so that the deferred
	// Close releases what was opened so far.
	d := &Daemon{opts: opts, cfg: effectiveConfig(opts)}
	defer func() {
		if err != nil {
			d.Close()
		}
	}()

	if opts.Dev && opts.DataDir == "" {
		return nil, errors.New("development mode needs a data directory")
	}
	if err := d.bind(); err != nil {
		return nil, err
	}
	installation, err := d.openStore(ctx)
	if err != nil {
		return nil, err
	}
	if err := d.registerPools(ctx); err != nil {
		return nil, err
	}
	if opts.Dev {
		if err := d.ensureDevAdminToken(ctx); err != nil {
			return nil, err
		}
	}

	metrics := newMetricsRegistry()
	reg := d.adapterRegistry()
	// One list for the API's checks and the pool manager's builds, so a pool the list
	// refuses can neither be written nor, stored before, be given its credential.
	allowed := d.cfg.CredentialsAllowlist()
	if err := d.startPools(ctx, reg, allowed, metrics); err != nil {
		return nil, err
	}
	// One group commit for the replica's sandbox writes, the scheduler's and the API's.
	writes := store.NewBatcher(d.st, opts.Clock.Now)
	if err := d.buildLoops(installation, writes, metrics); err != nil {
		return nil, err
	}
	if err := d.buildAPI(installation, writes, reg, allowed, metrics); err != nil {
		return nil, err
	}
	return d, nil
}

// withDefaults fills in what the caller left out.
func (o Options) withDefaults() Options {
	if o.Getenv == nil {
		o.Getenv = os.Getenv
	}
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Stdout == nil {
		o.Stdout = io.Discard
	}
	if o.ReplicaID == "" {
		o.ReplicaID = ids.New("replica")
	}
	if o.ShutdownGrace <= 0 {
		o.ShutdownGrace = 30 * time.Second
	}
	return o
}

// effectiveConfig is the config file's settings, or the defaults without one, with
// the environment's database URL applied where it may be.
func effectiveConfig(opts Options) *config.Config {
	cfg := opts.Config
	if cfg == nil {
		cfg = config.Default()
	}
	if opts.Config == nil && opts.Dev {
		// Plain development mode keeps everything in the data directory. A
		// DIFFERENTLY_DATABASE_URL exported for another purpose (a production
		// database, say) must not receive the development pools, a new admin token,
		// or a scheduler that places its sandboxes on devhost's host processes.
		if opts.Getenv(config.EnvDatabaseURL) != "" {
			opts.Logger.Warn("development mode without --config uses its own SQLite file; " +
				config.EnvDatabaseURL + " is ignored (pass --config with database.url to develop on another database)")
		}
	} else {
		cfg.ApplyEnv(opts.Getenv)
	}
	return cfg
}

// bind checks the listen address and binds it, and checks that the certificate, if
// any, loads.
func (d *Daemon) bind() error {
	listenAddr := d.cfg.Listen
	if d.opts.Listen != "" {
		listenAddr = d.opts.Listen
	}
	listenAddr, err := ListenAddress(listenAddr)
	if err != nil {
		return err
	}
	if d.ln, err = listen(listenAddr); err != nil {
		return err
	}
	// The certificate is loaded here once only to be checked: buildAPI's load is
	// where it is kept.
	if d.cfg.TLS.Enabled() {
		if _, err := loadCertificates(d.cfg.TLS.CertFile, d.cfg.TLS.KeyFile, d.opts.Logger); err != nil {
			return err
		}
	}
	return nil
}

// openStore opens the database (in development mode, by default a SQLite file in the
// data directory, which it creates) and returns the installation's ID.
func (d *Daemon) openStore(ctx context.Context) (installation string, err error) {
	dbURL := d.cfg.Database.URL
	if d.opts.Dev {
		if err := os.MkdirAll(d.opts.DataDir, 0o700); err != nil {
			return "", fmt.Errorf("data directory: %w", err)
		}
		if dbURL == "" {
			dbURL = "sqlite://" + filepath.Join(d.opts.DataDir, "differently.db")
		}
	}
	if dbURL == "" {
		return "", errors.New("no database: set database.url in the config or DIFFERENTLY_DATABASE_URL")
	}
	d.dbURL = dbURL
	// One daemon per SQLite file; PostgreSQL takes several replicas.
	if driver, path, perr := open.Parse(dbURL); perr == nil && driver == open.SQLite {
		if d.lock, err = lockDatabase(path); err != nil {
			return "", err
		}
	}
	if d.st, err = open.Open(ctx, dbURL); err != nil {
		return "", fmt.Errorf("database: %w", err)
	}
	installation, err = d.st.InstallationID(ctx)
	if err != nil {
		return "", fmt.Errorf("installation id: %w", err)
	}
	return installation, nil
}

// newMetricsRegistry is the one registry for every part's metrics; /metrics serves
// it. It starts with the process's own figures (memory, GC, goroutines, file
// descriptors, the build), which an operator reads beside the daemon's.
func newMetricsRegistry() *prometheus.Registry {
	metrics := prometheus.NewRegistry()
	metrics.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		collectors.NewBuildInfoCollector())
	return metrics
}

// adapterRegistry is this build's adapter kinds, held to the config's endpoint
// policy, with the caller's own kinds (Options.Adapters) added.
func (d *Daemon) adapterRegistry() *pools.Registry {
	reg := pools.DefaultRegistry(d.opts.Dev)
	reg.SetEndpointPolicy(d.cfg.EndpointPolicy(d.opts.Dev))
	if d.opts.Adapters != nil {
		d.opts.Adapters(reg)
	}
	return reg
}

// startPools builds the pool manager, loads the stored pools and probes them once.
func (d *Daemon) startPools(ctx context.Context, reg *pools.Registry, allowed api.EnvAllowlist, metrics prometheus.Registerer) error {
	// A half-open pool's trial Create holds its place as long as the scheduler lets
	// a Create run: the provision timeout plus its claim's margin.
	var breaker pools.BreakerOptions
	if n := d.cfg.Scheduler.ProvisionTimeoutSeconds; n > 0 {
		breaker.TrialLease = seconds(n) + defaults.ProvisionMargin
	}
	d.pools = pools.NewManager(d.st, reg, d.opts.Clock, pools.Options{Getenv: d.opts.Getenv,
		AllowedCredentialsEnv: allowed, Logger: d.opts.Logger, Metrics: metrics, Breaker: breaker})
	if err := d.pools.Load(ctx); err != nil {
		return fmt.Errorf("pools: %w", err)
	}
	// Probe once before serving, so the first requests see real health.
	if err := d.pools.Refresh(ctx); err != nil {
		d.opts.Logger.Warn("first pool probe", "err", err)
	}
	return nil
}

// buildLoops builds the scheduler and the reconciler, and the change feed that wakes
// the scheduler.
func (d *Daemon) buildLoops(installation string, writes *store.Batcher, metrics prometheus.Registerer) error {
	sc, log := d.cfg.Scheduler, d.opts.Logger
	var err error
	d.sched, err = scheduler.New(d.st, d.pools, d.opts.Clock, scheduler.Options{
		Writes:           writes,
		Installation:     installation,
		ReplicaID:        d.opts.ReplicaID,
		ProvisionTimeout: seconds(sc.ProvisionTimeoutSeconds),
		MaxAttempts:      sc.MaxAttempts,
		TerminateTimeout: seconds(sc.TerminateTimeoutSeconds),
		// The config's default for pools that set no maxStarting of their own.
		DefaultMaxStarting: sc.DefaultMaxStarting,
		Logger:             log,
		Metrics:            metrics,
		OnPass:             d.opts.OnSchedulerPass,
		Tracer:             tracing.Tracer(d.opts.TracerProvider),
	})
	if err != nil {
		return err
	}
	d.reconciler = reconcile.New(d.st, d.pools, d.opts.Clock, reconcile.Options{
		Installation:     installation,
		ReplicaID:        d.opts.ReplicaID,
		Interval:         seconds(sc.ReconcileIntervalSeconds),
		ProvisionTimeout: seconds(sc.ProvisionTimeoutSeconds),
		KeepPasses:       sc.ReconcilePassesKept,
		Logger:           log,
		Metrics:          metrics,
	})
	ev := d.cfg.Events
	d.pruner, err = retention.New(d.st, d.opts.Clock, store.EventRetention{
		PerSandbox:    ev.KeepPerSandbox,
		AfterTerminal: seconds(ev.KeepAfterTerminalSeconds),
	}, 0, log, metrics)
	if err != nil {
		return err
	}
	// The change feed wakes the scheduler for work any replica queued (a create, a
	// delete), and the API's waiters and caches.
	d.changes = changes.New()
	d.changes.Listen(func(c store.Change) {
		switch c.Kind {
		case store.ChangeSandbox:
			d.sched.Changed(c)
		case store.ChangeResync:
			if c.Err != nil {
				log.Warn("change feed interrupted; reconnecting", "error", c.Err)
			}
			d.sched.Notify()
		}
	})
	return nil
}

// buildAPI builds the HTTP API and the server that will serve it on the bound
// listener.
func (d *Daemon) buildAPI(installation string, writes *store.Batcher, reg *pools.Registry,
	allowed api.EnvAllowlist, metrics *prometheus.Registry) error {
	cfg, log := d.cfg, d.opts.Logger
	doors, err := d.frontDoors()
	if err != nil {
		return err
	}
	var service *sandboxes.Service
	handler, err := httpapi.New(httpapi.Options{
		Tracer:                tracing.Tracer(d.opts.TracerProvider),
		Store:                 d.st,
		Pools:                 d.pools,
		Scheduler:             d.sched,
		Direct:                d.sched,
		Writes:                writes,
		Changes:               d.changes,
		Reconciler:            d.reconciler,
		Clock:                 d.opts.Clock,
		Installation:          installation,
		AdapterKinds:          reg.Kinds,
		DevOnlyKinds:          reg.DevOnlyKinds(),
		CheckPoolConfig:       reg.CheckConfig,
		AllowedCredentialsEnv: allowed,
		Dev:                   d.opts.Dev,
		MaxQueued:             cfg.Scheduler.MaxQueued,
		MaxTransfers:          cfg.Files.MaxTransfers,
		MaxProjectTransfers:   cfg.Files.MaxProjectTransfers,
		LargeTransferBytes:    cfg.Files.LargeTransferBytes,
		AccessLog:             d.opts.AccessLog,
		Logger:                log,
		Metrics:               metrics,
		FrontDoors:            doors,
		// The filler is built below, from the service this builds; a claim before
		// Run starts it only wakes it early.
		Service:     func(svc *sandboxes.Service) { service = svc },
		OnWarmClaim: func(string) { d.warm.Wake() },
		WarmObserver: func(pool string, w store.WarmShape, o sandboxes.WarmOutcome, took time.Duration) {
			d.warm.Observe(pool, w, o, took)
		},
	})
	if err != nil {
		return err
	}
	d.warm, err = warm.New(warm.Options{
		Store: d.st, Sandboxes: service, Pools: d.pools, Clock: d.opts.Clock,
		ReplicaID: d.opts.ReplicaID, Logger: log, Metrics: metrics,
	})
	if err != nil {
		return err
	}
	// Connections are bounded before any request is authenticated (httpapi.ConnOptions).
	conns := httpapi.ConnOptions{MaxConnections: cfg.MaxConnections}
	d.srv = httpapi.NewHTTPServer(handler, conns, slog.NewLogLogger(log.Handler(), slog.LevelWarn))
	if cfg.TLS.Enabled() {
		certs, err := loadCertificates(cfg.TLS.CertFile, cfg.TLS.KeyFile, log)
		if err != nil {
			return err
		}
		d.srv.TLSConfig = &tls.Config{GetCertificate: certs.get, MinVersion: tls.VersionTLS12}
	}
	d.ln = httpapi.LimitListener(d.ln, conns)
	// Long waits answer at once on shutdown instead of holding it up.
	d.srv.RegisterOnShutdown(d.changes.Close)
	return nil
}

// frontDoors are the API's front doors: the console under /ui unless
// console.enabled is false, and E2B's protocol under /e2b unless e2b.enabled is false.
func (d *Daemon) frontDoors() ([]httpapi.FrontDoor, error) {
	var doors []httpapi.FrontDoor
	if d.cfg.Console.Enabled {
		doors = append(doors, d.consoleDoor())
	}
	if !d.cfg.E2B.Enabled {
		return doors, nil
	}
	secret := []byte(d.opts.Getenv(config.EnvE2BTokenSecret))
	switch {
	case len(secret) == 0:
		secret = make([]byte, 32)
		if _, err := rand.Read(secret); err != nil {
			return nil, fmt.Errorf("e2b token secret: %w", err)
		}
	case len(secret) < config.MinE2BTokenSecretBytes:
		return nil, fmt.Errorf("%s is %d bytes; it must be at least %d", config.EnvE2BTokenSecret,
			len(secret), config.MinE2BTokenSecretBytes)
	}
	log := d.opts.Logger
	return append(doors, httpapi.FrontDoor{Prefix: "/e2b", Build: func(b httpapi.Backend) (http.Handler, error) {
		// The envd front door owns the processes started through it; Run stops them
		// once the API has drained.
		d.envd = envd.NewHandler(b.Sandboxes, e2b.EnvdVerifier{Secret: secret, Sandboxes: b.Sandboxes},
			envd.Options{Log: log})
		h, err := e2b.NewHandler(e2b.Options{
			Sandboxes: b.Sandboxes, Authenticate: b.Authenticate, Await: b.Await, Secret: secret,
			BodyTimeout: b.BodyTimeout,
			Envd:        d.envd, Clock: d.opts.Clock, Logger: log,
		})
		if err != nil {
			return nil, err
		}
		return http.StripPrefix("/e2b", h), nil
	}}), nil
}

// consoleDoor serves the operator console under /ui (server/console) with the API's
// services and token check.
func (d *Daemon) consoleDoor() httpapi.FrontDoor {
	return httpapi.FrontDoor{Prefix: console.Prefix, Build: func(b httpapi.Backend) (http.Handler, error) {
		c, err := console.New(console.Options{
			Sandboxes: b.Sandboxes, Authenticate: b.Authenticate, Pools: b.Pools, Reconcile: b.Reconcile,
			ReconcilePasses: b.ReconcilePasses,
			Clock:           d.opts.Clock, Logger: d.opts.Logger,
		})
		if err != nil {
			return nil, err
		}
		return c, nil
	}}
}

func seconds(n int) time.Duration { return time.Duration(n) * time.Second }

// Addr is the address the API listens on.
func (d *Daemon) Addr() net.Addr { return d.ln.Addr() }

// URL is the API's base URL.
func (d *Daemon) URL() string {
	scheme := "http"
	if d.cfg.TLS.Enabled() {
		scheme = "https"
	}
	return scheme + "://" + d.ln.Addr().String()
}

// Run serves the API and runs the pool manager, the scheduler and the reconciler
// until ctx ends. Then, at once, it stops taking new connections and stops the
// loops: no new Create starts, and one in flight is handed back to the queue for
// another replica or the next start. Requests in flight get the shutdown grace to
// finish; past it, requests still running (a long streamed exec, say) are ended
// with the cause errShuttingDown, which a stream reports in its final event, and
// after a moment for those last writes the remaining connections are closed. The
// store closes last.
func (d *Daemon) Run(ctx context.Context) error {
	log := d.opts.Logger
	loopCtx, stopLoops := context.WithCancel(context.WithoutCancel(ctx))
	var loops sync.WaitGroup
	loops.Go(func() { _ = d.changes.Run(loopCtx, d.st) })
	loops.Go(func() { d.pools.Run(loopCtx) })
	loops.Go(func() { d.sched.Run(loopCtx) })
	loops.Go(func() { d.reconciler.Run(loopCtx) })
	loops.Go(func() { d.pruner.Run(loopCtx) })
	loops.Go(func() { d.warm.Run(loopCtx) })

	// Every request's context descends from base, so that the end of the grace can
	// end them with a cause the handlers can tell their clients.
	base, endRequests := context.WithCancelCause(context.WithoutCancel(ctx))
	defer endRequests(nil)
	d.srv.BaseContext = func(net.Listener) context.Context { return base }

	serveErr := make(chan error, 1)
	go func() {
		if d.cfg.TLS.Enabled() {
			// The certificate comes from TLSConfig.GetCertificate, which reloads it.
			serveErr <- d.srv.ServeTLS(d.ln, "", "")
		} else {
			serveErr <- d.srv.Serve(d.ln)
		}
	}()
	var err error
	select {
	case err = <-serveErr:
		stopLoops()
	case <-ctx.Done():
		log.Info("shutting down: draining requests", "grace", d.opts.ShutdownGrace)
		stopLoops()
		err = d.drain(context.WithoutCancel(ctx), endRequests)
		if serr := <-serveErr; !errors.Is(serr, http.ErrServerClosed) && err == nil {
			err = serr
		}
	}
	loops.Wait()
	// The warm pools' hits and misses of the last moments, the drain's included.
	flushCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), lastFlush)
	if ferr := d.warm.Flush(flushCtx); ferr != nil {
		log.Warn("the warm pools' last hits and misses were not recorded", "error", ferr)
	}
	cancel()
	if d.envd != nil {
		d.envd.Close()
	}
	if cerr := d.st.Close(); err == nil {
		err = cerr
	}
	d.lock.release()
	log.Info("stopped")
	return err
}

// errShuttingDown ends requests still running when the shutdown grace is over.
var errShuttingDown = api.Errorf(api.CodeProviderUnavailable, "the daemon is shutting down; run the command again")

// lastFlush bounds the write of the warm pools' last counts at shutdown.
const lastFlush = 5 * time.Second

// lastWrites is how long requests ended by errShuttingDown get to write their last
// words (a stream's final event) before their connections close.
const lastWrites = 2 * time.Second

// drain shuts the server down within the grace, then ends what is left.
func (d *Daemon) drain(ctx context.Context, endRequests context.CancelCauseFunc) error {
	graceCtx, cancel := context.WithTimeout(ctx, d.opts.ShutdownGrace)
	err := d.srv.Shutdown(graceCtx)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	d.opts.Logger.Warn("shutdown grace is over: ending the requests still running", "grace", d.opts.ShutdownGrace)
	endRequests(errShuttingDown)
	lastCtx, cancel := context.WithTimeout(ctx, lastWrites)
	err = d.srv.Shutdown(lastCtx)
	cancel()
	if errors.Is(err, context.DeadlineExceeded) {
		d.opts.Logger.Warn("closing connections whose requests did not end")
		err = d.srv.Close()
	}
	return err
}

// Close releases the listener and the store of a daemon that was never Run.
func (d *Daemon) Close() {
	if d.ln != nil {
		d.ln.Close()
	}
	if d.st != nil {
		d.st.Close()
	}
	d.lock.release()
}

// Store gives tests and tools the daemon's store.
func (d *Daemon) Store() store.Store { return d.st }

// AdminTokenPath is the file holding the first admin token of a development
// installation, or "" outside development mode or when the file is not there.
func (d *Daemon) AdminTokenPath() string {
	if !d.opts.Dev {
		return ""
	}
	path := filepath.Join(d.opts.DataDir, AdminTokenFile)
	if _, err := os.Stat(path); err != nil {
		return ""
	}
	return path
}

// ensureDevAdminToken creates the first admin token of a development database,
// writes it to DataDir/admin-token (0600) and prints it once.
func (d *Daemon) ensureDevAdminToken(ctx context.Context) error {
	toks, err := d.st.ListTokens(ctx)
	if err != nil {
		return err
	}
	if slices.ContainsFunc(toks, func(t store.Token) bool { return t.Scope == store.ScopeAdmin }) {
		return nil
	}
	secret, err := CreateToken(ctx, d.st, d.opts.Clock.Now(), store.Token{Scope: store.ScopeAdmin, Name: "first admin token"})
	if err != nil {
		return err
	}
	path := filepath.Join(d.opts.DataDir, AdminTokenFile)
	if err := os.WriteFile(path, []byte(secret+"\n"), 0o600); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	d.AdminToken = secret
	fmt.Fprintf(d.opts.Stdout, "admin token (shown once, also in %s): %s\n", path, secret)
	return nil
}

// CreateToken makes a token and returns its secret, which is stored only as a hash.
func CreateToken(ctx context.Context, st store.Store, now time.Time, tok store.Token) (string, error) {
	secret, err := tokens.New()
	if err != nil {
		return "", err
	}
	tok.ID = ids.New("tok")
	tok.Hash = tokens.Hash(secret)
	if _, err := st.CreateToken(ctx, now, tok); err != nil {
		return "", err
	}
	return secret, nil
}
