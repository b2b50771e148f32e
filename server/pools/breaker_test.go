package pools

import (
	"testing"
	"time"
)

// step is one event of a breaker's life: a Create asked for (begin) or ended (end),
// at offset at from t0, and what the breaker must say right after it.
type step struct {
	at    time.Duration
	begin bool // else end
	// For an end: the outcome and whether it was a trial.
	outcome CreateOutcome
	trial   bool
	// For a begin: whether it is let through, and as a trial.
	wantOK, wantTrial bool
	// What status says after the step.
	want      BreakerState
	wantUntil time.Duration // OpenUntil from t0 when open; 0 for none
	wantFails int
}

func begin(at time.Duration, ok, trial bool, want BreakerState) step {
	return step{at: at, begin: true, wantOK: ok, wantTrial: trial, want: want, wantFails: -1}
}

func end(at time.Duration, o CreateOutcome, trial bool, want BreakerState, until time.Duration, fails int) step {
	return step{at: at, outcome: o, trial: trial, want: want, wantUntil: until, wantFails: fails}
}

const sec = time.Second

func TestBreakerStateMachine(t *testing.T) {
	opts := BreakerOptions{Threshold: 3, CoolDown: 30 * sec, MaxCoolDown: 100 * sec, Trials: 1, TrialLease: 130 * sec}
	tests := []struct {
		name  string
		steps []step
	}{
		{"closed lets every create through", []step{
			begin(0, true, false, BreakerClosed),
			begin(0, true, false, BreakerClosed),
			end(1*sec, CreateSucceeded, false, BreakerClosed, 0, 0),
		}},
		{"failures below the threshold keep it closed", []step{
			end(1*sec, CreateOutage, false, BreakerClosed, 0, 1),
			end(2*sec, CreateOutage, false, BreakerClosed, 0, 2),
			begin(3*sec, true, false, BreakerClosed),
		}},
		{"a success resets the count", []step{
			end(1*sec, CreateOutage, false, BreakerClosed, 0, 1),
			end(2*sec, CreateOutage, false, BreakerClosed, 0, 2),
			end(3*sec, CreateSucceeded, false, BreakerClosed, 0, 0),
			end(4*sec, CreateOutage, false, BreakerClosed, 0, 1),
		}},
		{"neutral outcomes neither count nor reset", []step{
			end(1*sec, CreateOutage, false, BreakerClosed, 0, 1),
			end(2*sec, CreateNeutral, false, BreakerClosed, 0, 1),
			end(3*sec, CreateOutage, false, BreakerClosed, 0, 2),
		}},
		{"the threshold opens it for the cool-down", []step{
			end(1*sec, CreateOutage, false, BreakerClosed, 0, 1),
			end(2*sec, CreateOutage, false, BreakerClosed, 0, 2),
			end(3*sec, CreateOutage, false, BreakerOpen, 33*sec, 3),
			begin(10*sec, false, false, BreakerOpen),
			begin(32*sec, false, false, BreakerOpen),
		}},
		{"a late failure while open does not extend it", []step{
			end(0, CreateOutage, false, BreakerClosed, 0, 1),
			end(0, CreateOutage, false, BreakerClosed, 0, 2),
			end(0, CreateOutage, false, BreakerOpen, 30*sec, 3),
			end(10*sec, CreateOutage, false, BreakerOpen, 30*sec, 4),
		}},
		{"after the cool-down one trial at a time", []step{
			end(0, CreateOutage, false, BreakerClosed, 0, 1),
			end(0, CreateOutage, false, BreakerClosed, 0, 2),
			end(0, CreateOutage, false, BreakerOpen, 30*sec, 3),
			begin(30*sec, true, true, BreakerHalfOpen),
			begin(31*sec, false, false, BreakerHalfOpen),
		}},
		{"a trial's success closes it", []step{
			end(0, CreateOutage, false, BreakerClosed, 0, 1),
			end(0, CreateOutage, false, BreakerClosed, 0, 2),
			end(0, CreateOutage, false, BreakerOpen, 30*sec, 3),
			begin(40*sec, true, true, BreakerHalfOpen),
			end(41*sec, CreateSucceeded, true, BreakerClosed, 0, 0),
			begin(42*sec, true, false, BreakerClosed),
		}},
		{"a trial's failure opens it again for twice as long, up to the maximum", []step{
			end(0, CreateOutage, false, BreakerClosed, 0, 1),
			end(0, CreateOutage, false, BreakerClosed, 0, 2),
			end(0, CreateOutage, false, BreakerOpen, 30*sec, 3),
			begin(30*sec, true, true, BreakerHalfOpen),
			end(31*sec, CreateOutage, true, BreakerOpen, 91*sec, 4),
			begin(91*sec, true, true, BreakerHalfOpen),
			end(92*sec, CreateOutage, true, BreakerOpen, 192*sec, 5), // 120 s, cut to 100 s
			begin(192*sec, true, true, BreakerHalfOpen),
			end(193*sec, CreateSucceeded, true, BreakerClosed, 0, 0),
			// Closed again: the next opening starts from the first cool-down.
			end(194*sec, CreateOutage, false, BreakerClosed, 0, 1),
			end(194*sec, CreateOutage, false, BreakerClosed, 0, 2),
			end(194*sec, CreateOutage, false, BreakerOpen, 224*sec, 3),
		}},
		{"a trial that says nothing frees its place for another", []step{
			end(0, CreateOutage, false, BreakerClosed, 0, 1),
			end(0, CreateOutage, false, BreakerClosed, 0, 2),
			end(0, CreateOutage, false, BreakerOpen, 30*sec, 3),
			begin(30*sec, true, true, BreakerHalfOpen),
			end(31*sec, CreateNeutral, true, BreakerHalfOpen, 0, 3),
			begin(32*sec, true, true, BreakerHalfOpen),
		}},
		{"a failure begun before the opening does not end the trial", []step{
			end(0, CreateOutage, false, BreakerClosed, 0, 1),
			end(0, CreateOutage, false, BreakerClosed, 0, 2),
			end(0, CreateOutage, false, BreakerOpen, 30*sec, 3),
			begin(30*sec, true, true, BreakerHalfOpen),
			end(31*sec, CreateOutage, false, BreakerHalfOpen, 0, 4),
			begin(31*sec, false, false, BreakerHalfOpen),
		}},
		{"a trial that never reports stops others only for its lease", []step{
			end(0, CreateOutage, false, BreakerClosed, 0, 1),
			end(0, CreateOutage, false, BreakerClosed, 0, 2),
			end(0, CreateOutage, false, BreakerOpen, 30*sec, 3),
			begin(30*sec, true, true, BreakerHalfOpen),
			begin(30*sec+opts.TrialLease-1, false, false, BreakerHalfOpen),
			// The lease ran out: the silent trial gives its place up, and does not
			// count as a failure.
			begin(30*sec+opts.TrialLease, true, true, BreakerHalfOpen),
			end(31*sec+opts.TrialLease, CreateSucceeded, true, BreakerClosed, 0, 0),
		}},
		{"a lapsed trial's late failure does not reopen it", []step{
			end(0, CreateOutage, false, BreakerClosed, 0, 1),
			end(0, CreateOutage, false, BreakerClosed, 0, 2),
			end(0, CreateOutage, false, BreakerOpen, 30*sec, 3),
			begin(30*sec, true, true, BreakerHalfOpen),
			end(30*sec+opts.TrialLease, CreateOutage, true, BreakerHalfOpen, 0, 4),
			begin(31*sec+opts.TrialLease, true, true, BreakerHalfOpen),
		}},
		{"any success closes it, even one begun before it opened", []step{
			end(0, CreateOutage, false, BreakerClosed, 0, 1),
			end(0, CreateOutage, false, BreakerClosed, 0, 2),
			end(0, CreateOutage, false, BreakerOpen, 30*sec, 3),
			end(5*sec, CreateSucceeded, false, BreakerClosed, 0, 0),
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newBreaker(opts)
			// An end with trial set reports the last trial let through.
			var trialStart time.Time
			for i, st := range tt.steps {
				now := t0.Add(st.at)
				if st.begin {
					ok, trial := b.allow(now)
					if ok != st.wantOK || trial != st.wantTrial {
						t.Fatalf("step %d: allow = %v, trial %v; want %v, %v", i, ok, trial, st.wantOK, st.wantTrial)
					}
					if trial {
						trialStart = now
					}
				} else {
					var start time.Time
					if st.trial {
						start = trialStart
					}
					b.record(now, st.outcome, start, "boom")
				}
				got := b.status(now)
				if got.State != st.want {
					t.Fatalf("step %d: state %s, want %s", i, got.State, st.want)
				}
				var until time.Time
				if st.wantUntil != 0 {
					until = t0.Add(st.wantUntil)
				}
				if !st.begin && !got.OpenUntil.Equal(until) {
					t.Fatalf("step %d: openUntil %v, want %v", i, got.OpenUntil, until)
				}
				if st.wantFails >= 0 && got.ConsecutiveFailures != st.wantFails {
					t.Fatalf("step %d: %d failures, want %d", i, got.ConsecutiveFailures, st.wantFails)
				}
				if (got.State == BreakerClosed) != (got.Reason == "") {
					t.Fatalf("step %d: state %s with reason %q", i, got.State, got.Reason)
				}
			}
		})
	}
}

func TestBreakerDefaults(t *testing.T) {
	b := newBreaker(BreakerOptions{})
	for range DefaultBreakerThreshold {
		b.record(t0, CreateOutage, time.Time{}, "down")
	}
	if st := b.status(t0); st.State != BreakerOpen || !st.OpenUntil.Equal(t0.Add(DefaultBreakerCoolDown)) || st.Reason != "down" {
		t.Fatalf("after %d failures: %+v", DefaultBreakerThreshold, st)
	}
	if st := b.status(t0.Add(DefaultBreakerCoolDown)); st.State != BreakerHalfOpen || !st.OpenUntil.IsZero() {
		t.Fatalf("after the cool-down: %+v", st)
	}
}

func TestBreakerTrialsFull(t *testing.T) {
	b := newBreaker(BreakerOptions{Threshold: 1, CoolDown: 30 * sec, Trials: 1, TrialLease: 130 * sec})
	b.record(t0, CreateOutage, time.Time{}, "down")
	at := t0.Add(30 * sec)
	if st := b.status(at); st.State != BreakerHalfOpen || st.TrialsFull {
		t.Fatalf("half-open, no trial yet: %+v", st)
	}
	if ok, trial := b.allow(at); !ok || !trial {
		t.Fatalf("allow = %v, %v", ok, trial)
	}
	if st := b.status(at); !st.TrialsFull {
		t.Fatalf("with its trial in flight: %+v", st)
	}
	if st := b.status(at.Add(130 * sec)); st.State != BreakerHalfOpen || st.TrialsFull {
		t.Fatalf("after the trial's lease: %+v", st)
	}
}
