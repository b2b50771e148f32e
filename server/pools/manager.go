package pools

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/internal/clock"
	"github.com/different-ai/differently/internal/redact"
	"github.com/different-ai/differently/server/metrics"
	"github.com/different-ai/differently/server/store"
)

// Defaults of Options.
const (
	DefaultRefreshInterval = 5 * time.Second
	DefaultProbeTimeout    = 10 * time.Second
)

// Options tune a Manager; zero values take the defaults.
type Options struct {
	// RefreshInterval is how often Run re-reads the pools and probes them.
	RefreshInterval time.Duration
	// ProbeTimeout bounds one pool's probe (Capabilities, Health and Capacity together).
	ProbeTimeout time.Duration
	// Getenv resolves credentials variables; os.Getenv when nil.
	Getenv func(string) string
	// AllowedCredentialsEnv is the operator's allowlist of credentials variables: a
	// pool naming another is not built, and its variable is not read.
	AllowedCredentialsEnv api.EnvAllowlist
	Logger                *slog.Logger
	// Breaker tunes every pool's circuit breaker (BeginCreate, EndCreate).
	Breaker BreakerOptions
	// Metrics receives differently_pool_healthy{pool}: 1 when the pool's last probe
	// succeeded and nothing marked it unhealthy since, else 0; refreshed after every
	// Refresh and on MarkUnhealthy. And differently_pool_breaker_state{pool} (0
	// closed, 1 half-open, 2 open) and differently_pool_breaker_opens_total{pool}.
	// Nil records them nowhere. NewManager panics when a metric cannot be registered
	// (another collector took its name).
	Metrics prometheus.Registerer
}

// Manager keeps one View per stored pool: it builds each pool's adapter, rebuilds it
// when the pool changes (through the admin API or on another replica), and probes it.
// It is safe for concurrent use; probing never holds the lock readers take, so a slow
// backend does not hold up placement.
type Manager struct {
	st   store.Store
	reg  *Registry
	clk  clock.Clock
	opts Options
	log  *slog.Logger

	// syncMu lets one Load or Refresh run at a time, so two never build the same
	// pool's adapter twice or publish entry sets out of order.
	syncMu sync.Mutex

	mu      sync.RWMutex
	entries map[string]*entry
	nextGen uint64

	healthy      *prometheus.GaugeVec
	breakerState *prometheus.GaugeVec
	breakerOpens *prometheus.CounterVec
	// published are the pools the gauges have a series for, guarded by mu.
	published map[string]bool
}

type entry struct {
	view View
	// secret removes the pool's credential, in every form internal/redact knows
	// (whole, in pieces, base64, hex, JSON- or URL-escaped), from the errors an
	// adapter might word badly. Nil, which removes nothing, until a build succeeds.
	secret *redact.Set
	// gen identifies this build of the adapter; a probe result for an older build
	// is dropped.
	gen uint64
	// marks counts MarkUnhealthy calls, so that a probe which began before the
	// scheduler saw the pool fail cannot declare it healthy again.
	marks uint64
	// breaker is fed by the outcomes of the pool's Creates on this replica. It lives
	// as long as the adapter: a rebuilt adapter starts closed.
	breaker *breaker
}

// NewManager returns a manager with no views; call Load or Refresh to fill it.
func NewManager(st store.Store, reg *Registry, clk clock.Clock, opts Options) *Manager {
	if opts.RefreshInterval <= 0 {
		opts.RefreshInterval = DefaultRefreshInterval
	}
	if opts.ProbeTimeout <= 0 {
		opts.ProbeTimeout = DefaultProbeTimeout
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	healthy := metrics.MustRegister(opts.Metrics, prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "differently_pool_healthy",
		Help: "1 when the pool's last probe on this replica succeeded and no call failed as an outage since, else 0.",
	}, []string{"pool"}))
	breakerState := metrics.MustRegister(opts.Metrics, prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "differently_pool_breaker_state",
		Help: "The pool's circuit breaker on this replica: 0 closed, 1 half-open (trial Creates), 2 open (left out of placement).",
	}, []string{"pool"}))
	breakerOpens := metrics.MustRegister(opts.Metrics, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "differently_pool_breaker_opens_total",
		Help: "Times the pool's circuit breaker opened on this replica after its Creates failed as an outage.",
	}, []string{"pool"}))
	return &Manager{st: st, reg: reg, clk: clk, opts: opts, log: log, entries: map[string]*entry{},
		healthy: healthy, breakerState: breakerState, breakerOpens: breakerOpens, published: map[string]bool{}}
}

// Load reads every pool from the store and builds the adapters of new or changed
// pools, without probing: the views stay unhealthy until Refresh. A pool whose adapter
// cannot be built stays listed, unhealthy, with the reason in LastError.
func (m *Manager) Load(ctx context.Context) error {
	m.syncMu.Lock()
	defer m.syncMu.Unlock()
	return m.sync(ctx)
}

// Refresh does what Load does and then probes every pool with an adapter,
// concurrently, each within ProbeTimeout. Only a failure to read the store is
// returned; a pool's failures are recorded in its view.
func (m *Manager) Refresh(ctx context.Context) error {
	m.syncMu.Lock()
	defer m.syncMu.Unlock()
	if err := m.sync(ctx); err != nil {
		return err
	}
	m.probeAll(ctx)
	m.publishHealth()
	return ctx.Err()
}

// publishHealth sets differently_pool_healthy and differently_pool_breaker_state from
// the views and drops the series of removed pools.
func (m *Manager) publishHealth() {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.clk.Now()
	for name, e := range m.entries {
		m.healthy.WithLabelValues(name).Set(boolValue(e.view.Healthy))
		m.publishBreaker(name, e, now)
		// At 0 from the start, so that a rate over it sees the first opening.
		m.breakerOpens.WithLabelValues(name)
		m.published[name] = true
	}
	for name := range m.published {
		if _, ok := m.entries[name]; !ok {
			m.healthy.DeleteLabelValues(name)
			m.breakerState.DeleteLabelValues(name)
			m.breakerOpens.DeleteLabelValues(name)
			delete(m.published, name)
		}
	}
}

// publishBreaker sets the pool's breaker gauge; mu is held.
func (m *Manager) publishBreaker(name string, e *entry, now time.Time) {
	v := 0.0
	switch e.breaker.status(now).State {
	case BreakerHalfOpen:
		v = 1
	case BreakerOpen:
		v = 2
	}
	m.breakerState.WithLabelValues(name).Set(v)
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// Run refreshes every RefreshInterval until ctx is done, and blocks until then. It
// does not refresh at once: callers refresh before starting it, so that startup sees
// the pools and can report a store failure.
func (m *Manager) Run(ctx context.Context) {
	t := time.NewTicker(m.opts.RefreshInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := m.Refresh(ctx); err != nil && ctx.Err() == nil {
				m.log.Warn("pool refresh failed", "err", err)
			}
		}
	}
}

// Views returns every pool's view, sorted by name. The views are copies.
func (m *Manager) Views() []View {
	now := m.clk.Now()
	m.mu.RLock()
	out := make([]View, 0, len(m.entries))
	for _, e := range m.entries {
		out = append(out, e.copyView(now))
	}
	m.mu.RUnlock()
	slices.SortFunc(out, func(a, b View) int { return strings.Compare(a.Pool.Name, b.Pool.Name) })
	return out
}

// View returns one pool's view.
func (m *Manager) View(name string) (View, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	e, ok := m.entries[name]
	if !ok {
		return View{}, false
	}
	return e.copyView(m.clk.Now()), true
}

// CreateTicket is a Create's pass through its pool's breaker, from BeginCreate to
// EndCreate.
type CreateTicket struct {
	pool string
	gen  uint64
	// trial is when the breaker let the Create through as a half-open trial; zero
	// for any other Create.
	trial time.Time
}

// BeginCreate asks the pool's breaker whether a Create may go to the pool now: always
// while it is closed, never while it is open, and while it is half-open as a trial,
// as long as fewer than BreakerOptions.Trials are in flight. Every ticket granted
// must be handed back to EndCreate, with CreateNeutral when the Create never ran.
func (m *Manager) BeginCreate(name string) (CreateTicket, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.entries[name]
	if !ok {
		return CreateTicket{}, false
	}
	now := m.clk.Now()
	allowed, trial := e.breaker.allow(now)
	t := CreateTicket{pool: name, gen: e.gen}
	if trial {
		m.log.Info("pool breaker half-open: trial create", "pool", name)
		t.trial = now
	}
	m.publishBreaker(name, e, now)
	m.published[name] = true
	return t, allowed
}

// EndCreate reports how a Create begun with BeginCreate ended; err is the failure of
// an outage, for the breaker's reason. The outcome of a Create on an adapter since
// rebuilt is dropped.
func (m *Manager) EndCreate(t CreateTicket, o CreateOutcome, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.entries[t.pool]
	if !ok || e.gen != t.gen || t.pool == "" {
		return
	}
	reason := ""
	if err != nil {
		reason = e.secret.String(api.Message(err))
	}
	now := m.clk.Now()
	before := e.breaker.status(now).State
	if e.breaker.record(now, o, t.trial, reason) {
		m.breakerOpens.WithLabelValues(t.pool).Inc()
		st := e.breaker.status(now)
		m.log.Warn("pool breaker open: creates keep failing", "pool", t.pool,
			"failures", st.ConsecutiveFailures, "until", st.OpenUntil, "err", reason)
	} else if before != BreakerClosed && e.breaker.status(now).State == BreakerClosed {
		m.log.Info("pool breaker closed: a create succeeded", "pool", t.pool)
	}
	m.publishBreaker(t.pool, e, now)
	m.published[t.pool] = true
}

// MarkUnhealthy records that the pool failed outside a probe (the scheduler saw
// provider_unavailable). The pool stays unhealthy until a probe that starts after this
// call succeeds.
func (m *Manager) MarkUnhealthy(name string, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.entries[name]
	if !ok {
		return
	}
	e.marks++
	msg := "marked unhealthy"
	if err != nil {
		msg = e.secret.String(api.Message(err))
	}
	if e.view.Healthy {
		m.log.Warn("pool marked unhealthy", "pool", name, "err", msg)
	}
	e.view.Healthy = false
	e.view.LastError = msg
	// A pool removed meanwhile by a Refresh is not re-published: entries holds it.
	m.healthy.WithLabelValues(name).Set(0)
	m.published[name] = true
}

// RebuildsAdapter reports whether changing a pool from old to next reaches its
// adapter, which must then be built anew: the adapter kind, its config or its
// credentials variable changed. A factory may read nothing else of the pool
// (Factory), so any other change keeps the adapter built for old, with what it holds.
func RebuildsAdapter(old, next store.Pool) bool {
	return old.Adapter != next.Adapter || old.CredentialsEnv != next.CredentialsEnv ||
		!reflect.DeepEqual(nonNilConfig(old.Config), nonNilConfig(next.Config))
}

// nonNilConfig makes an empty config and a missing one the same.
func nonNilConfig(c map[string]any) map[string]any {
	if c == nil {
		return map[string]any{}
	}
	return c
}

// sync makes the entries match the store: new pools and pools whose change reaches the
// adapter (RebuildsAdapter) get a fresh adapter, other changes update the view and keep
// the adapter, removed pools are dropped, and a pool whose adapter could not be built
// is tried again (the cause, such as a directory, may have been fixed).
func (m *Manager) sync(ctx context.Context) error {
	list, err := m.st.ListPools(ctx)
	if err != nil {
		return fmt.Errorf("pools: reading the pool list: %w", err)
	}

	// Only sync changes which entries exist, and syncMu is held, so what is read here
	// is still current when the new set is published below.
	m.mu.RLock()
	reuse := map[string]bool{}
	for _, p := range list {
		if e, ok := m.entries[p.Name]; ok && e.view.Adapter != nil && !RebuildsAdapter(e.view.Pool, p) {
			reuse[p.Name] = true
		}
	}
	m.mu.RUnlock()

	// Build outside the lock: a factory may touch the disk.
	fresh := map[string]*entry{}
	for _, p := range list {
		if !reuse[p.Name] {
			fresh[p.Name] = m.build(ctx, p)
		}
	}

	m.mu.Lock()
	defer m.mu.Unlock()
	next := make(map[string]*entry, len(list))
	for _, p := range list {
		if reuse[p.Name] {
			e := m.entries[p.Name]
			if e.view.Pool.Version != p.Version {
				// A change the adapter never sees (limits, cost, trust, region,
				// features): the adapter, and the instances it may hold in memory,
				// stay; only what placement reads of the pool changes.
				e.view.Pool = p
				e.view.Trust = effectiveTrust(p, e.view.Info)
				m.log.Info("pool changed; adapter kept", "pool", p.Name, "version", p.Version)
			}
			next[p.Name] = e
			continue
		}
		e := fresh[p.Name]
		m.nextGen++
		e.gen = m.nextGen
		old, existed := m.entries[p.Name]
		switch {
		case e.view.Adapter == nil && (!existed || old.view.LastError != e.view.LastError):
			m.log.Warn("pool adapter not built", "pool", p.Name, "adapter", p.Adapter, "err", e.view.LastError)
		case e.view.Adapter != nil && existed && old.view.Pool.Version != p.Version:
			m.log.Info("pool changed; adapter rebuilt", "pool", p.Name, "version", p.Version)
		}
		next[p.Name] = e
	}
	for name := range m.entries {
		if _, ok := next[name]; !ok {
			m.log.Info("pool removed", "pool", name)
		}
	}
	m.entries = next
	return nil
}

func (m *Manager) build(ctx context.Context, p store.Pool) *entry {
	e := &entry{view: View{Pool: p, Trust: p.Trust, Info: adapters.Info{Kind: p.Adapter}},
		breaker: newBreaker(m.opts.Breaker)}
	env := Env{Getenv: m.opts.Getenv, Allowed: m.opts.AllowedCredentialsEnv}
	a, err := m.reg.Build(ctx, p, env)
	if err != nil {
		e.view.LastError = api.Message(err)
		e.view.KindMissing = !m.reg.Has(p.Adapter)
		e.view.LastProbeAt = m.clk.Now()
		return e
	}
	// Build succeeded, so the credentials resolve.
	creds, _ := ResolveCredentials(p, env)
	e.secret = redact.New(creds.secret)
	e.view.Adapter = a
	e.view.Info = a.Info()
	e.view.Trust = effectiveTrust(p, e.view.Info)
	e.view.AwaitingProbe = true
	return e
}

// effectiveTrust: the operator's setting is authoritative; the adapter's claim only
// fills a gap.
func effectiveTrust(p store.Pool, info adapters.Info) api.Trust {
	if p.Trust != "" {
		return p.Trust
	}
	return info.Trust
}

type probeTarget struct {
	name  string
	a     adapters.ExecutionAdapter
	gen   uint64
	marks uint64
}

type probeResult struct {
	info     adapters.Info
	caps     adapters.Capabilities
	capacity adapters.Capacity
	capsErr  error
	capErr   error
	err      error // the first failure, or nil
}

func (m *Manager) probeAll(ctx context.Context) {
	m.mu.RLock()
	targets := make([]probeTarget, 0, len(m.entries))
	for name, e := range m.entries {
		if e.view.Adapter != nil {
			targets = append(targets, probeTarget{name: name, a: e.view.Adapter, gen: e.gen, marks: e.marks})
		}
	}
	m.mu.RUnlock()

	var wg sync.WaitGroup
	for _, t := range targets {
		wg.Go(func() {
			r := m.probe(ctx, t.a)
			if ctx.Err() != nil {
				// Shutting down: "context canceled" says nothing about the pool.
				return
			}
			m.apply(t, r)
		})
	}
	wg.Wait()
}

// probe asks the adapter for everything a view holds. All three calls are made even
// after one fails, so a view shows as much as the backend could tell.
func (m *Manager) probe(ctx context.Context, a adapters.ExecutionAdapter) probeResult {
	ctx, cancel := context.WithTimeout(ctx, m.opts.ProbeTimeout)
	defer cancel()
	var r probeResult
	r.caps, r.capsErr = a.Capabilities(ctx)
	if r.capsErr != nil {
		r.err = fmt.Errorf("capabilities: %s", api.Message(r.capsErr))
	} else {
		r.caps.Features = adapters.EffectiveFeatures(a, r.caps.Features)
	}
	if err := a.Health(ctx); err != nil && r.err == nil {
		r.err = fmt.Errorf("health: %s", api.Message(err))
	}
	r.capacity, r.capErr = a.Capacity(ctx)
	if r.capErr != nil && r.err == nil {
		r.err = fmt.Errorf("capacity: %s", api.Message(r.capErr))
	}
	// After Capabilities: a remote adapter learns its Info there.
	r.info = a.Info()
	return r
}

func (m *Manager) apply(t probeTarget, r probeResult) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.entries[t.name]
	if !ok || e.gen != t.gen {
		return // the pool was removed or rebuilt while it was probed
	}
	v := &e.view
	v.Info = r.info
	v.Trust = effectiveTrust(v.Pool, r.info)
	v.LastProbeAt = m.clk.Now()
	// A failed call keeps the last good answer: features of a pool that is briefly
	// unreachable should not vanish, or calls on its running sandboxes would answer
	// "unsupported" instead of "unavailable".
	if r.capsErr == nil {
		v.Capabilities = r.caps
		v.AwaitingProbe = false
	}
	if r.capErr == nil {
		v.Capacity = r.capacity
	}
	wasHealthy := v.Healthy
	switch {
	case r.err != nil:
		v.Healthy = false
		v.LastError = e.secret.String(r.err.Error())
	case e.marks != t.marks:
		// Marked unhealthy while this probe ran: keep the mark until a later probe.
		v.Healthy = false
	default:
		v.Healthy = true
		v.LastError = ""
	}
	switch {
	case wasHealthy && !v.Healthy:
		m.log.Warn("pool unhealthy", "pool", t.name, "err", v.LastError)
	case !wasHealthy && v.Healthy:
		m.log.Info("pool healthy", "pool", t.name)
	}
}

// copyView returns the entry's view with the breaker as it stands at now.
func (e *entry) copyView(now time.Time) View {
	v := copyView(e.view)
	v.Breaker = e.breaker.status(now)
	return v
}

// copyView copies the slices and the config map too, so a caller changing its copy
// cannot change what other readers see.
func copyView(v View) View {
	v.Pool.Config = maps.Clone(v.Pool.Config)
	v.Pool.Features = slices.Clone(v.Pool.Features)
	v.Pool.Warm = slices.Clone(v.Pool.Warm)
	v.Capabilities.Features = slices.Clone(v.Capabilities.Features)
	v.Capabilities.Templates = slices.Clone(v.Capabilities.Templates)
	v.Capabilities.Regions = slices.Clone(v.Capabilities.Regions)
	return v
}
