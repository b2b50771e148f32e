package lifecycle_test

import (
	"testing"
	"time"

	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/server/lifecycle"
	"github.com/different-ai/differently/server/store"
)

var (
	t0 = time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	by = lifecycle.Scheduler("replica-1")
)

// transitions applies each transition with plausible arguments. The map's keys name
// them in failures; the states each may start from are in legal.
var transitions = map[string]func(sb *store.Sandbox) error{
	"create": func(sb *store.Sandbox) error { return lifecycle.Create(sb, t0, by) },
	"place": func(sb *store.Sandbox) error {
		return lifecycle.Place(sb, lifecycle.Placement{Pool: "p", Claimer: "replica-1", ClaimUntil: t0.Add(time.Minute)}, t0, by)
	},
	"wait": func(sb *store.Sandbox) error { return lifecycle.Wait(sb, "waiting: full", "", t0, nil, by) },
	"run": func(sb *store.Sandbox) error {
		return lifecycle.Run(sb, lifecycle.Instance{Ref: "r"}, t0, time.Second, by)
	},
	"adopt": func(sb *store.Sandbox) error {
		return lifecycle.Adopt(sb, lifecycle.Instance{Ref: "r"}, t0, "found", by)
	},
	"requeue": func(sb *store.Sandbox) error {
		return lifecycle.Requeue(sb, lifecycle.Retry{Reason: "again", At: t0}, by)
	},
	"fail":   func(sb *store.Sandbox) error { return lifecycle.Fail(sb, lifecycle.Failure{Reason: "broken"}, by) },
	"stop":   func(sb *store.Sandbox) error { return lifecycle.Operate(sb, lifecycle.OpStop, by) },
	"start":  func(sb *store.Sandbox) error { return lifecycle.Operate(sb, lifecycle.OpStart, by) },
	"pause":  func(sb *store.Sandbox) error { return lifecycle.Operate(sb, lifecycle.OpPause, by) },
	"resume": func(sb *store.Sandbox) error { return lifecycle.Operate(sb, lifecycle.OpResume, by) },
	"observe stopped": func(sb *store.Sandbox) error {
		return lifecycle.Observe(sb, store.StateStopped, "stopped on the backend", by)
	},
	"terminate":     func(sb *store.Sandbox) error { return lifecycle.Terminate(sb, "deleted", t0, by) },
	"bind instance": func(sb *store.Sandbox) error { return lifecycle.BindInstance(sb, "r", by) },
	"delete failed": func(sb *store.Sandbox) error { return lifecycle.DeleteFailed(sb, "busy", "", false, by) },
	"terminated":    func(sb *store.Sandbox) error { return lifecycle.Terminated(sb, "", by) },
}

// legal is, for each transition, the states it may start from and the state it
// leaves the sandbox in. Every other starting state must be refused.
var legal = map[string]map[store.State]store.State{
	"create":  {"": store.StateQueued, store.StateQueued: store.StateQueued},
	"place":   {store.StateQueued: store.StateProvisioning},
	"wait":    {store.StateQueued: store.StateQueued},
	"run":     {store.StateProvisioning: store.StateRunning},
	"adopt":   {store.StateQueued: store.StateRunning, store.StateProvisioning: store.StateRunning},
	"requeue": {store.StateQueued: store.StateQueued, store.StateProvisioning: store.StateQueued},
	"fail": {store.StateQueued: store.StateFailed, store.StateProvisioning: store.StateFailed,
		store.StateRunning: store.StateFailed, store.StateStopped: store.StateFailed,
		store.StatePaused: store.StateFailed, store.StateTerminating: store.StateFailed},
	"stop":   {store.StateRunning: store.StateStopped},
	"start":  {store.StateStopped: store.StateRunning},
	"pause":  {store.StateRunning: store.StatePaused},
	"resume": {store.StatePaused: store.StateRunning},
	"observe stopped": {store.StateRunning: store.StateStopped, store.StateStopped: store.StateStopped,
		store.StatePaused: store.StateStopped},
	"terminate": {store.StateQueued: store.StateTerminating, store.StateProvisioning: store.StateTerminating,
		store.StateRunning: store.StateTerminating, store.StateStopped: store.StateTerminating,
		store.StatePaused: store.StateTerminating},
	"bind instance": {store.StateTerminating: store.StateTerminating},
	"delete failed": {store.StateTerminating: store.StateTerminating},
	"terminated":    {store.StateTerminating: store.StateTerminated},
}

var states = []store.State{"", store.StateQueued, store.StateProvisioning, store.StateRunning,
	store.StateStopped, store.StatePaused, store.StateTerminating, store.StateTerminated, store.StateFailed}

func TestTransitionTable(t *testing.T) {
	if len(transitions) != len(legal) {
		t.Fatalf("%d transitions, %d rows of legal states", len(transitions), len(legal))
	}
	for name, apply := range transitions {
		for _, from := range states {
			t.Run(name+" from "+string(from), func(t *testing.T) {
				sb := store.Sandbox{ID: "sbx_1", State: from, Pool: "p", Reason: "before"}
				before := sb
				err := apply(&sb)
				to, ok := legal[name][from]
				if !ok {
					if !api.IsCode(err, api.CodeInvalidState) {
						t.Fatalf("error = %v, want invalid_state", err)
					}
					if sb.State != before.State || sb.Reason != before.Reason || sb.Pool != before.Pool || len(sb.Pending) != 0 {
						t.Fatalf("a refused transition changed the sandbox: %+v", sb)
					}
					return
				}
				if err != nil {
					t.Fatalf("error = %v", err)
				}
				if sb.State != to {
					t.Fatalf("state = %q, want %q", sb.State, to)
				}
				for _, e := range sb.Pending {
					if e.To == "" || e.Actor != string(by) || !e.Type.Valid() {
						t.Fatalf("malformed event %+v", e)
					}
				}
				if n := len(sb.Pending); n > 0 && sb.Pending[n-1].To != to {
					t.Fatalf("last event ends in %q, the sandbox in %q", sb.Pending[n-1].To, to)
				}
			})
		}
	}
}

// What each transition writes beside the state: the fields the scheduler, the
// reconciler and the API once each wrote their own way.
func TestTransitionFields(t *testing.T) {
	until := t0.Add(time.Minute)
	avoidUntil := t0.Add(time.Hour)
	claimed := func(sb store.Sandbox) store.Sandbox {
		sb.ClaimedBy, sb.ClaimExpiresAt = "replica-1", &until
		return sb
	}
	tests := []struct {
		name  string
		sb    store.Sandbox
		apply func(*store.Sandbox) error
		check func(t *testing.T, sb store.Sandbox)
	}{
		{
			name: "run clears the pools to avoid, sets region, expiry and ends the claim",
			sb: claimed(store.Sandbox{State: store.StateProvisioning, Pool: "p", TTLSeconds: 60,
				AvoidPool: "q", AvoidUntil: &avoidUntil, Reason: "old"}),
			apply: func(sb *store.Sandbox) error {
				return lifecycle.Run(sb, lifecycle.Instance{Ref: "r1", Region: "eu"}, t0, 2*time.Second, by)
			},
			check: func(t *testing.T, sb store.Sandbox) {
				if sb.BackendRef != "r1" || sb.Region != "eu" || sb.AvoidPool != "" || sb.AvoidUntil != nil ||
					sb.ClaimedBy != "" || sb.Reason != "" || sb.ExpiresAt == nil || !sb.ExpiresAt.Equal(t0.Add(time.Minute)) {
					t.Fatalf("%+v", sb)
				}
				if e := sb.Pending[0]; e.Type != store.EventRunning || e.DurationMs != 2000 || e.Pool != "p" || e.Attempt != 1 {
					t.Fatalf("event %+v", e)
				}
			},
		},
		{
			name: "adopt writes what run writes",
			sb: claimed(store.Sandbox{State: store.StateProvisioning, Pool: "p", AvoidPool: "q",
				AvoidUntil: &avoidUntil}),
			apply: func(sb *store.Sandbox) error {
				return lifecycle.Adopt(sb, lifecycle.Instance{Ref: "r1", Region: "eu"}, t0, "found", by)
			},
			check: func(t *testing.T, sb store.Sandbox) {
				if sb.BackendRef != "r1" || sb.Region != "eu" || sb.AvoidPool != "" || sb.ClaimedBy != "" {
					t.Fatalf("%+v", sb)
				}
				if e := sb.Pending[0]; e.Type != store.EventAdopted || e.Message != "found" {
					t.Fatalf("event %+v", e)
				}
			},
		},
		{
			name: "requeue clears pool and claim, counts and avoids when asked",
			sb:   claimed(store.Sandbox{State: store.StateProvisioning, Pool: "p", Region: "eu", Attempts: 1}),
			apply: func(sb *store.Sandbox) error {
				return lifecycle.Requeue(sb, lifecycle.Retry{Reason: "pool p: down", Code: "provider_unavailable",
					At: t0.Add(4 * time.Second), Counted: true, Avoid: "p", AvoidUntil: avoidUntil, Duration: time.Second}, by)
			},
			check: func(t *testing.T, sb store.Sandbox) {
				if sb.Pool != "" || sb.Region != "" || sb.ClaimedBy != "" || sb.Attempts != 2 ||
					!sb.NextAttemptAt.Equal(t0.Add(4*time.Second)) || sb.AvoidPool != "p" || sb.Reason != "pool p: down" {
					t.Fatalf("%+v", sb)
				}
				if e := sb.Pending[0]; e.Pool != "p" || e.Attempt != 2 || e.Code != "provider_unavailable" || e.DurationMs != 1000 {
					t.Fatalf("event %+v", e)
				}
			},
		},
		{
			name:  "terminate is due at once",
			sb:    store.Sandbox{State: store.StateRunning, Pool: "p", NextAttemptAt: t0.Add(-time.Hour)},
			apply: func(sb *store.Sandbox) error { return lifecycle.Terminate(sb, "ttl expired", t0, by) },
			check: func(t *testing.T, sb store.Sandbox) {
				if !sb.NextAttemptAt.Equal(t0) || sb.Reason != "ttl expired" {
					t.Fatalf("%+v", sb)
				}
			},
		},
		{
			name:  "wait records an event only when the reason changes",
			sb:    claimed(store.Sandbox{State: store.StateQueued, Reason: "waiting: full"}),
			apply: func(sb *store.Sandbox) error { return lifecycle.Wait(sb, "waiting: full", "", t0, nil, by) },
			check: func(t *testing.T, sb store.Sandbox) {
				if len(sb.Pending) != 0 || sb.ClaimedBy != "" {
					t.Fatalf("%+v", sb)
				}
			},
		},
		{
			name: "a delete given up on fails the sandbox",
			sb:   claimed(store.Sandbox{State: store.StateTerminating, Pool: "p", BackendRef: "r"}),
			apply: func(sb *store.Sandbox) error {
				return lifecycle.DeleteFailed(sb, "gone for good", "internal", true, by)
			},
			check: func(t *testing.T, sb store.Sandbox) {
				if sb.State != store.StateFailed || sb.ClaimedBy != "" || sb.Pending[0].Type != store.EventFailed {
					t.Fatalf("%+v", sb)
				}
			},
		},
		{
			name:  "bind instance is refused once an instance is bound",
			sb:    store.Sandbox{State: store.StateTerminating, BackendRef: "r0"},
			apply: func(sb *store.Sandbox) error { return lifecycle.BindInstance(sb, "r1", by) },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sb := tt.sb
			err := tt.apply(&sb)
			if tt.check == nil {
				if !api.IsCode(err, api.CodeInvalidState) {
					t.Fatalf("error = %v, want invalid_state", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, sb)
		})
	}
}

func TestCandidates(t *testing.T) {
	got := lifecycle.Candidates([]string{"b", "a"}, map[string]string{"z": "unhealthy", "c": "full"})
	want := []store.Candidate{{Pool: "b", Rank: 1}, {Pool: "a", Rank: 2}, {Pool: "c", Reason: "full"}, {Pool: "z", Reason: "unhealthy"}}
	if len(got) != len(want) {
		t.Fatalf("%+v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("candidate %d = %+v, want %+v", i, got[i], want[i])
		}
	}
	if lifecycle.Candidates(nil, nil) != nil {
		t.Fatal("no pools weighed, yet candidates")
	}
}
