package pools

import (
	"slices"
	"time"

	"github.com/different-ai/differently/server/defaults"
)

// BreakerState is where a pool's circuit breaker stands.
type BreakerState string

const (
	// BreakerClosed: Creates go to the pool.
	BreakerClosed BreakerState = "closed"
	// BreakerOpen: the pool's Creates kept failing as an outage; placement leaves the
	// pool out until the cool-down ends.
	BreakerOpen BreakerState = "open"
	// BreakerHalfOpen: the cool-down ended; a few trial Creates may go to the pool,
	// and the first outcome decides whether it closes or opens again.
	BreakerHalfOpen BreakerState = "half-open"
)

// Defaults of BreakerOptions.
const (
	DefaultBreakerThreshold   = 3
	DefaultBreakerCoolDown    = 30 * time.Second
	DefaultBreakerMaxCoolDown = 5 * time.Minute
	DefaultBreakerTrials      = 1
	// DefaultBreakerTrialLease is the default provision timeout plus the margin the
	// scheduler's provisioning claim adds: by then a trial Create has either reported
	// or been cut off by the scheduler.
	DefaultBreakerTrialLease = defaults.ProvisionTimeout + defaults.ProvisionMargin
)

// BreakerOptions tune every pool's circuit breaker; zero values take the defaults.
type BreakerOptions struct {
	// Threshold is how many Creates in a row must fail as an outage to open the
	// breaker.
	Threshold int
	// CoolDown is how long the breaker stays open the first time; each time a trial
	// fails and it opens again, twice as long as the last, up to MaxCoolDown.
	CoolDown    time.Duration
	MaxCoolDown time.Duration
	// Trials is how many trial Creates may be in flight at once while half-open.
	Trials int
	// TrialLease is how long a trial Create holds its place. A trial whose outcome
	// has not come back after this long no longer stops another trial: a lost report
	// must not keep the pool out of placement for good. Set it to at least the
	// scheduler's provision timeout plus its claim margin.
	TrialLease time.Duration
}

func (o BreakerOptions) withDefaults() BreakerOptions {
	if o.Threshold <= 0 {
		o.Threshold = DefaultBreakerThreshold
	}
	if o.CoolDown <= 0 {
		o.CoolDown = DefaultBreakerCoolDown
	}
	if o.MaxCoolDown <= 0 {
		o.MaxCoolDown = DefaultBreakerMaxCoolDown
	}
	o.MaxCoolDown = max(o.MaxCoolDown, o.CoolDown)
	if o.Trials <= 0 {
		o.Trials = DefaultBreakerTrials
	}
	if o.TrialLease <= 0 {
		o.TrialLease = DefaultBreakerTrialLease
	}
	return o
}

// BreakerStatus is what a View shows of the pool's breaker.
type BreakerStatus struct {
	State BreakerState
	// Reason is the failure that opened the breaker, or the last one while it is
	// half-open; empty when closed.
	Reason string
	// OpenUntil is when an open breaker turns half-open; zero otherwise.
	OpenUntil time.Time
	// ConsecutiveFailures counts the Creates failed as an outage since the last
	// success.
	ConsecutiveFailures int
	// TrialsFull says the breaker is half-open with as many trial Creates in flight
	// as BreakerOptions.Trials allows: BeginCreate refuses the pool until one ends or
	// its lease runs out. A half-open pool without it takes the next Create sent to
	// it as a trial.
	TrialsFull bool
}

// CreateOutcome classifies how a Create ended, for the breaker.
type CreateOutcome int

const (
	// CreateNeutral says nothing about the pool: it answered, but not with an
	// instance (insufficient_capacity, sandbox_failed, invalid_request), or the
	// Create never ran or was cut short by a shutdown.
	CreateNeutral CreateOutcome = iota
	// CreateSucceeded: the pool made the instance.
	CreateSucceeded
	// CreateOutage: provider_unavailable, a timeout or another error the
	// scheduler treats as the pool's outage.
	CreateOutage
)

// breaker is one pool's circuit breaker. It is a plain state machine: the manager
// holds its lock and passes the time, so tests drive it without a clock.
//
// Only Create outcomes move it. A probe that passes does not close it: a backend can
// answer its health check while every Create fails, and that pool is the one the
// breaker exists to leave out.
type breaker struct {
	opts     BreakerOptions
	state    BreakerState
	failures int
	reason   string
	until    time.Time
	// openings counts the openings since the breaker last closed; the cool-down
	// doubles with each.
	openings int
	// trials holds when each trial Create in flight while half-open began; one older
	// than the trial lease no longer counts (lapse).
	trials []time.Time
}

func newBreaker(opts BreakerOptions) *breaker {
	return &breaker{opts: opts.withDefaults(), state: BreakerClosed}
}

// allow reports whether a Create may go to the pool now, and whether it is a
// half-open trial, begun at now, whose outcome the caller must report with that
// start.
func (b *breaker) allow(now time.Time) (ok, trial bool) {
	b.advance(now)
	switch b.state {
	case BreakerClosed:
		return true, false
	case BreakerHalfOpen:
		if len(b.trials) < b.opts.Trials {
			b.trials = append(b.trials, now)
			return true, true
		}
	}
	return false, false
}

// record takes a Create's outcome in and reports whether the breaker opened.
// trialStart is when allow let the Create through as a trial, zero for any other
// Create. A trial that lapsed, or that began before the breaker last opened, is no
// longer one of those in flight, and its outcome counts as any other Create's.
func (b *breaker) record(now time.Time, o CreateOutcome, trialStart time.Time, reason string) (opened bool) {
	b.advance(now)
	trial := false
	if !trialStart.IsZero() {
		if i := slices.IndexFunc(b.trials, trialStart.Equal); i >= 0 {
			b.trials = slices.Delete(b.trials, i, i+1)
			trial = true
		}
	}
	switch o {
	case CreateSucceeded:
		// Any success closes, a trial's or one begun before the breaker opened: the
		// pool made an instance just now.
		*b = breaker{opts: b.opts, state: BreakerClosed}
	case CreateOutage:
		b.failures++
		b.reason = reason
		switch {
		case b.state == BreakerClosed && b.failures >= b.opts.Threshold,
			b.state == BreakerHalfOpen && trial:
			b.open(now)
			return true
		}
		// A Create begun before the breaker opened, failing now, changes nothing
		// more: its news is older than what opened it, or than the trial under way.
	}
	return false
}

func (b *breaker) open(now time.Time) {
	b.openings++
	cool := b.opts.CoolDown
	for i := 1; i < b.openings && cool < b.opts.MaxCoolDown; i++ {
		cool *= 2
	}
	b.state = BreakerOpen
	b.until = now.Add(min(cool, b.opts.MaxCoolDown))
	b.trials = nil
}

// advance turns an open breaker half-open once its cool-down has passed, and drops
// the trials whose lease ran out.
//
// A lapsed trial does not count as a failure: the scheduler reports a Create that
// outran its provision timeout as an outage itself, so a trial still silent after
// the lease lost its report on this replica, which says nothing about the pool.
func (b *breaker) advance(now time.Time) {
	if b.state == BreakerOpen && !now.Before(b.until) {
		b.state = BreakerHalfOpen
		b.trials = nil
	}
	b.trials = slices.DeleteFunc(b.trials, func(start time.Time) bool { return b.lapsed(start, now) })
}

func (b *breaker) lapsed(start, now time.Time) bool {
	return now.Sub(start) >= b.opts.TrialLease
}

// status is the breaker as it stands at now, without changing it.
func (b *breaker) status(now time.Time) BreakerStatus {
	s := BreakerStatus{State: b.state, Reason: b.reason, ConsecutiveFailures: b.failures}
	switch {
	case b.state == BreakerOpen && !now.Before(b.until):
		s.State = BreakerHalfOpen
	case b.state == BreakerHalfOpen:
		live := 0
		for _, start := range b.trials {
			if !b.lapsed(start, now) {
				live++
			}
		}
		s.TrialsFull = live >= b.opts.Trials
	case b.state == BreakerOpen:
		s.OpenUntil = b.until
	case b.state == BreakerClosed:
		s.Reason = ""
	}
	return s
}
