package scheduler

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/adapters/fake"
	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/internal/clock"
	"github.com/different-ai/differently/server/metrics"
	"github.com/different-ai/differently/server/store"
)

// slowCreate takes took of the injected clock per Create.
type slowCreate struct {
	*fake.Adapter
	clk  *clock.Manual
	took time.Duration
}

func (s *slowCreate) Create(ctx context.Context, req adapters.CreateRequest) (adapters.Instance, error) {
	s.clk.Advance(s.took)
	return s.Adapter.Create(ctx, req)
}

func sample(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) metrics.Sample {
	t.Helper()
	s, ok, err := metrics.Get(reg, name, labels)
	if err != nil {
		t.Fatal(err)
	}
	if !ok {
		t.Fatalf("no series %s%v", name, labels)
	}
	return s
}

func TestMetricsProvision(t *testing.T) {
	reg := prometheus.NewRegistry()
	sc := &slowCreate{Adapter: fake.New(fake.Config{CreateErrors: []api.Code{api.CodeSandboxFailed, api.CodeInsufficientCapacity}})}
	e := newEnv(t, Options{Metrics: reg}, view("fake", sc))
	sc.clk, sc.took = e.clk, 3*time.Second
	sb := e.create(t, store.Sandbox{})

	e.provision(t) // sandbox_failed: counted, backoff 4 s
	e.clk.Advance(Backoff(1))
	e.provision(t) // insufficient_capacity: requeued after 2 s
	e.clk.Advance(RequeueDelay)
	e.provision(t) // ok
	wantState(t, e.get(t, sb.ID), store.StateRunning)

	for code, want := range map[string]float64{"ok": 1, "sandbox_failed": 1, "insufficient_capacity": 1} {
		if got := sample(t, reg, "differently_create_attempts_total", map[string]string{"pool": "fake", "code": code}).Value; got != want {
			t.Errorf("attempts{code=%s} = %v, want %v", code, got, want)
		}
	}
	h := sample(t, reg, "differently_provision_seconds", map[string]string{"pool": "fake"})
	if h.Value != 1 || h.Sum != 3 {
		t.Errorf("provision_seconds: count %v sum %v, want 1 and 3 (claim to running of the last attempt)", h.Value, h.Sum)
	}
	// Three attempts: queued at t0, claimed at once; requeued at +3 s and claimed at
	// +7 s (the backoff); requeued at +10 s and claimed at +12 s. Each Create takes
	// 3 s of the clock, and nothing else moves it.
	for stage, want := range map[string][2]float64{
		stageQueue: {3, 6}, stagePlace: {3, 0}, stageCreate: {3, 9}, stageReady: {1, 0},
	} {
		h := sample(t, reg, "differently_stage_seconds", map[string]string{"stage": stage, "pool": "fake"})
		if h.Value != want[0] || h.Sum != want[1] {
			t.Errorf("stage_seconds{stage=%s}: count %v sum %v, want %v and %v", stage, h.Value, h.Sum, want[0], want[1])
		}
	}
}

func TestMetricsQueueDepthAndTerminations(t *testing.T) {
	reg := prometheus.NewRegistry()
	fk := &flakyDelete{Adapter: fake.New(fake.Config{})}
	e := newEnv(t, Options{Metrics: reg}, view("fake", fk))
	a := running(t, e, store.Sandbox{})
	b := running(t, e, store.Sandbox{TTLSeconds: 60})
	running(t, e, store.Sandbox{})
	e.set(t, a.ID, func(sb *store.Sandbox) { sb.State = store.StateStopped })
	e.create(t, store.Sandbox{NextAttemptAt: t0.Add(time.Hour)}) // queued, not yet due
	e.set(t, e.create(t, store.Sandbox{}).ID, func(sb *store.Sandbox) {
		sb.State, sb.Pool = store.StateProvisioning, "fake"
	})

	depth := func(want map[store.State]float64) {
		t.Helper()
		for _, st := range store.NonTerminalStates {
			if got := sample(t, reg, "differently_sandboxes", map[string]string{"state": string(st)}).Value; got != want[st] {
				t.Errorf("sandboxes{state=%s} = %v, want %v", st, got, want[st])
			}
		}
	}
	e.clk.Advance(time.Minute) // b expires
	fk.failures = 1
	e.expire(t)
	e.terminate(t) // b's Delete fails once
	depth(map[store.State]float64{store.StateQueued: 1, store.StateProvisioning: 1, store.StateRunning: 1,
		store.StateStopped: 1, store.StateTerminating: 1})
	e.expire(t)
	e.terminate(t)
	depth(map[store.State]float64{store.StateQueued: 1, store.StateProvisioning: 1, store.StateRunning: 1,
		store.StateStopped: 1})
	wantState(t, e.get(t, b.ID), store.StateTerminated)
	for result, want := range map[string]float64{termDeleteFailed: 1, termDeleted: 1} {
		if got := sample(t, reg, "differently_terminations_total", map[string]string{"result": result}).Value; got != want {
			t.Errorf("terminations{result=%s} = %v, want %v", result, got, want)
		}
	}
}

// A Delete that keeps failing is retried until TerminateGiveUp has passed since the
// sandbox entered terminating; then the sandbox fails, and its instance is left to
// the reconciler as an orphan.
func TestTerminateGivesUpAfterTerminateGiveUp(t *testing.T) {
	reg := prometheus.NewRegistry()
	fk := &flakyDelete{Adapter: fake.New(fake.Config{}), failures: 1 << 30}
	e := newEnv(t, Options{Metrics: reg}, view("fake", fk))
	sb := running(t, e, store.Sandbox{})
	e.set(t, sb.ID, toTerminating)

	if r := e.terminate(t); r.Failed != 0 || r.Errors != 1 {
		t.Fatalf("first pass = %+v", r)
	}
	e.clk.Advance(time.Hour - time.Second)
	e.terminate(t)
	wantState(t, e.get(t, sb.ID), store.StateTerminating)

	e.clk.Advance(time.Second)
	if r := e.terminate(t); r.Failed != 1 || r.Terminated != 0 {
		t.Fatalf("pass at 1 h = %+v", r)
	}
	got := e.get(t, sb.ID)
	wantState(t, got, store.StateFailed)
	if want := "delete kept failing for 1h: backend is down; the backend instance may still exist"; got.Reason != want {
		t.Errorf("reason %q, want %q", got.Reason, want)
	}
	if got.BackendRef != sb.BackendRef || fk.Instances() != 1 {
		t.Errorf("ref %q (was %q), instances %d", got.BackendRef, sb.BackendRef, fk.Instances())
	}
	if r := e.terminate(t); r != (Result{Pass: PassTerminate}) {
		t.Errorf("a failed sandbox is still terminated: %+v", r)
	}
	if v := sample(t, reg, "differently_terminations_total", map[string]string{"result": termGaveUp}).Value; v != 1 {
		t.Errorf("terminations{result=gave_up} = %v", v)
	}
}

func TestTerminateGiveUpOption(t *testing.T) {
	e := newEnv(t, Options{TerminateGiveUp: 90 * time.Minute}, view("fake", &flakyDelete{Adapter: fake.New(fake.Config{}), failures: 1 << 30}))
	sb := running(t, e, store.Sandbox{})
	e.set(t, sb.ID, toTerminating)
	e.clk.Advance(time.Hour)
	e.terminate(t)
	wantState(t, e.get(t, sb.ID), store.StateTerminating)
	e.clk.Advance(30 * time.Minute)
	e.terminate(t)
	if got := e.get(t, sb.ID); got.State != store.StateFailed || got.Reason != "delete kept failing for 90m: backend is down; the backend instance may still exist" {
		t.Errorf("%s %q", got.State, got.Reason)
	}
}

// madeUpCode answers every Create with an error code no adapter contract defines,
// as a buggy plugin might (a request ID in the code field, say).
type madeUpCode struct{ *fake.Adapter }

func (madeUpCode) Create(context.Context, adapters.CreateRequest) (adapters.Instance, error) {
	return adapters.Instance{}, api.Errorf("req_01m8s7", "broken plugin")
}

// A code the contract does not define is counted as internal, not as a series of
// its own: a plugin must not be able to grow the metrics without bound.
func TestMetricsUnknownCodeIsInternal(t *testing.T) {
	reg := prometheus.NewRegistry()
	e := newEnv(t, Options{Metrics: reg}, view("fake", madeUpCode{fake.New(fake.Config{})}))
	e.create(t, store.Sandbox{})
	e.provision(t)
	if got := sample(t, reg, "differently_create_attempts_total", map[string]string{"pool": "fake", "code": "internal"}).Value; got != 1 {
		t.Errorf("attempts{code=internal} = %v, want 1", got)
	}
	if _, ok, _ := metrics.Get(reg, "differently_create_attempts_total", map[string]string{"pool": "fake", "code": "req_01m8s7"}); ok {
		t.Error("the made-up code became a label")
	}
}
