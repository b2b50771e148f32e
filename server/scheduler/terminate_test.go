package scheduler

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/adapters/fake"
	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/server/pools"
	"github.com/different-ai/differently/server/store"
)

// flakyDelete fails its first failures Deletes with provider_unavailable.
type flakyDelete struct {
	*fake.Adapter
	mu       sync.Mutex
	failures int
}

func (f *flakyDelete) Delete(ctx context.Context, ref string) error {
	f.mu.Lock()
	fail := f.failures > 0
	f.failures--
	f.mu.Unlock()
	if fail {
		return adapters.Unavailable("backend is down")
	}
	return f.Adapter.Delete(ctx, ref)
}

func running(t *testing.T, e *env, sb store.Sandbox) store.Sandbox {
	t.Helper()
	sb = e.create(t, sb)
	e.provision(t)
	got := e.get(t, sb.ID)
	wantState(t, got, store.StateRunning)
	return got
}

func toTerminating(sb *store.Sandbox) { sb.State = store.StateTerminating }

func TestTerminateDeletesInstance(t *testing.T) {
	fk := fake.New(fake.Config{})
	e := newEnv(t, Options{}, view("fake", fk))
	sb := running(t, e, store.Sandbox{})
	if r := e.terminate(t); r.Terminated != 0 {
		t.Fatalf("terminated a running sandbox: %+v", r)
	}
	e.set(t, sb.ID, toTerminating)
	if r := e.terminate(t); r != (Result{Pass: PassTerminate, Terminated: 1}) {
		t.Fatalf("result = %+v", r)
	}
	wantState(t, e.get(t, sb.ID), store.StateTerminated)
	if fk.Instances() != 0 {
		t.Errorf("instances = %d", fk.Instances())
	}
}

func TestTerminateRetriesFailedDelete(t *testing.T) {
	fk := &flakyDelete{Adapter: fake.New(fake.Config{}), failures: 1}
	e := newEnv(t, Options{}, view("fake", fk))
	sb := running(t, e, store.Sandbox{})
	e.set(t, sb.ID, toTerminating)

	if r := e.terminate(t); r.Terminated != 0 || r.Errors != 1 {
		t.Fatalf("first pass = %+v", r)
	}
	got := e.get(t, sb.ID)
	wantState(t, got, store.StateTerminating)
	if got.Reason != "delete failed: backend is down" || fk.Instances() != 1 {
		t.Fatalf("reason %q, instances %d", got.Reason, fk.Instances())
	}
	if r := e.terminate(t); r.Terminated != 1 {
		t.Fatalf("second pass = %+v", r)
	}
	got = e.get(t, sb.ID)
	wantState(t, got, store.StateTerminated)
	if got.Reason != "" || fk.Instances() != 0 {
		t.Errorf("reason %q, instances %d", got.Reason, fk.Instances())
	}
}

// notFoundDelete answers not_found to Delete and deletes nothing, as a misrouted
// endpoint does; once fixed, it deletes.
type notFoundDelete struct {
	*fake.Adapter
	fixed atomic.Bool
}

func (f *notFoundDelete) Delete(ctx context.Context, ref string) error {
	if !f.fixed.Load() {
		return adapters.NotFound("no route for DELETE /instances/%s", ref)
	}
	return f.Adapter.Delete(ctx, ref)
}

// A Delete that answers not_found while the instance is still there does not end
// the sandbox: the contract forbids that answer, and taken at its word it would
// leave the instance running, out of sight.
func TestTerminateDoesNotTakeNotFoundForDeleted(t *testing.T) {
	fk := &notFoundDelete{Adapter: fake.New(fake.Config{})}
	e := newEnv(t, Options{}, view("fake", fk))
	sb := running(t, e, store.Sandbox{})
	e.set(t, sb.ID, toTerminating)
	if r := e.terminate(t); r.Terminated != 0 || r.Errors != 1 {
		t.Fatalf("pass with a not_found Delete = %+v", r)
	}
	if got := e.get(t, sb.ID); got.State != store.StateTerminating || fk.Instances() != 1 {
		t.Fatalf("state %s, instances %d; want terminating and 1", got.State, fk.Instances())
	}
	fk.fixed.Store(true)
	if r := e.terminate(t); r.Terminated != 1 {
		t.Fatalf("pass once Delete works = %+v", r)
	}
	wantState(t, e.get(t, sb.ID), store.StateTerminated)
}

func TestTerminateWithoutInstance(t *testing.T) {
	e := newEnv(t, Options{}, view("fake", fake.New(fake.Config{})))
	never := e.create(t, store.Sandbox{ID: "sbx_never"})
	e.set(t, never.ID, toTerminating)
	// Placed and under a live claim: a Create may be in flight, whose outcome brings
	// the ref; the terminator waits for it.
	lease := t0.Add(time.Minute)
	inFlight := e.create(t, store.Sandbox{ID: "sbx_inflight"})
	e.set(t, inFlight.ID, func(sb *store.Sandbox) {
		sb.State, sb.Pool, sb.ClaimedBy, sb.ClaimExpiresAt = store.StateTerminating, "fake", "replica-2", &lease
	})

	if r := e.terminate(t); r.Terminated != 1 {
		t.Fatalf("result = %+v", r)
	}
	wantState(t, e.get(t, never.ID), store.StateTerminated)
	wantState(t, e.get(t, inFlight.ID), store.StateTerminating)
	e.clk.Set(lease)
	if r := e.terminate(t); r.Terminated != 1 {
		t.Fatalf("after the lease: %+v", r)
	}
	wantState(t, e.get(t, inFlight.ID), store.StateTerminated)
}

func TestTerminatePoolWithoutAdapter(t *testing.T) {
	gone := pools.View{Pool: store.Pool{Name: "gone", Adapter: "nosuchkind"}, KindMissing: true,
		LastError: `adapter kind "nosuchkind" is not in this build`}
	e := newEnv(t, Options{}, gone)
	sb := e.create(t, store.Sandbox{})
	e.set(t, sb.ID, func(sb *store.Sandbox) {
		sb.State, sb.Pool, sb.BackendRef = store.StateTerminating, "gone", "ref-1"
	})
	if r := e.terminate(t); r.Terminated != 1 {
		t.Fatalf("result = %+v", r)
	}
	got := e.get(t, sb.ID)
	wantState(t, got, store.StateTerminated)
	if got.Reason != ReasonAdapterUnavailable {
		t.Errorf("reason %q", got.Reason)
	}
}

func TestTerminateUnknownPoolWaits(t *testing.T) {
	e := newEnv(t, Options{})
	sb := e.create(t, store.Sandbox{})
	e.set(t, sb.ID, func(sb *store.Sandbox) {
		sb.State, sb.Pool, sb.BackendRef = store.StateTerminating, "later", "ref-1"
	})
	if r := e.terminate(t); r.Terminated != 0 || r.Errors != 1 {
		t.Fatalf("result = %+v", r)
	}
	got := e.get(t, sb.ID)
	wantState(t, got, store.StateTerminating)
	if got.Reason != "delete failed: pool later is not loaded on this replica" {
		t.Errorf("reason %q", got.Reason)
	}
	version := got.Version
	e.terminate(t)
	if got := e.get(t, sb.ID); got.Version != version {
		t.Errorf("an unchanged failure rewrote the row: version %d, was %d", got.Version, version)
	}
}

func TestExpireThenTerminate(t *testing.T) {
	fk := fake.New(fake.Config{})
	e := newEnv(t, Options{}, view("fake", fk))
	short := running(t, e, store.Sandbox{TTLSeconds: 60})
	long := running(t, e, store.Sandbox{TTLSeconds: 3600})
	forever := running(t, e, store.Sandbox{})
	stopped := running(t, e, store.Sandbox{TTLSeconds: 30})
	e.set(t, stopped.ID, func(sb *store.Sandbox) { sb.State = store.StateStopped })

	e.clk.Advance(59 * time.Second)
	if r := e.expire(t); r.Expired != 1 {
		t.Fatalf("at 59 s: %+v", r)
	}
	e.clk.Advance(time.Second)
	if r := e.expire(t); r != (Result{Pass: PassExpire, Expired: 1}) {
		t.Fatalf("at 60 s: %+v", r)
	}
	for _, id := range []string{short.ID, stopped.ID} {
		got := e.get(t, id)
		wantState(t, got, store.StateTerminating)
		if got.Reason != ReasonTTLExpired {
			t.Errorf("reason %q", got.Reason)
		}
	}
	wantState(t, e.get(t, long.ID), store.StateRunning)
	wantState(t, e.get(t, forever.ID), store.StateRunning)

	if r := e.terminate(t); r.Terminated != 2 {
		t.Fatalf("terminate = %+v", r)
	}
	got := e.get(t, short.ID)
	wantState(t, got, store.StateTerminated)
	if got.Reason != ReasonTTLExpired || fk.Instances() != 2 {
		t.Errorf("reason %q, instances %d", got.Reason, fk.Instances())
	}
}

// A pool whose adapter this replica cannot build for now (a credential variable
// unset here, a bad config) keeps its sandboxes terminating: the instance still
// exists, and it is deleted once the pool builds again.
func TestTerminatePoolWithBrokenAdapterRetries(t *testing.T) {
	fk := fake.New(fake.Config{})
	v := view("p", fk)
	broken := v
	broken.Adapter, broken.Healthy, broken.LastError = nil, false, "credentials variable P_KEY is not set or empty"
	e := newEnv(t, Options{}, broken)
	inst, err := fk.Create(t.Context(), adapters.CreateRequest{ID: "sbx_x", Installation: installation})
	if err != nil {
		t.Fatal(err)
	}
	sb := e.create(t, store.Sandbox{})
	e.set(t, sb.ID, func(sb *store.Sandbox) {
		sb.State, sb.Pool, sb.BackendRef = store.StateTerminating, "p", inst.Ref
	})
	e.terminate(t)
	got := e.get(t, sb.ID)
	wantState(t, got, store.StateTerminating)
	// The reason is the tenant's to read: why the adapter is missing is not.
	if strings.Contains(got.Reason, "P_KEY") || !strings.Contains(got.Reason, "adapter could not be built") {
		t.Errorf("reason %q", got.Reason)
	}
	e.pools.Set(v) // the variable is set again
	e.clk.Advance(time.Minute)
	if r := e.terminate(t); r.Terminated != 1 {
		t.Fatalf("after the pool builds again: %+v", r)
	}
	if fk.Instances() != 0 {
		t.Errorf("%d instances left", fk.Instances())
	}
}

// blockingDelete holds every Delete until release is closed, telling entered.
type blockingDelete struct {
	*fake.Adapter
	entered chan struct{}
	release chan struct{}
}

func (b blockingDelete) Delete(ctx context.Context, ref string) error {
	select {
	case b.entered <- struct{}{}:
	default:
	}
	<-b.release
	return nil
}

// notifyingDelete tells deleted of every Delete it made.
type notifyingDelete struct {
	*fake.Adapter
	deleted chan string
}

func (n notifyingDelete) Delete(ctx context.Context, ref string) error {
	err := n.Adapter.Delete(ctx, ref)
	n.deleted <- ref
	return err
}

// A pool whose Deletes hang does not hold up the deletions of another pool in the
// same termination pass: each pool has workers of its own.
func TestTerminateDownPoolDoesNotHoldUpOthers(t *testing.T) {
	down := blockingDelete{Adapter: fake.New(fake.Config{}), entered: make(chan struct{}, 1), release: make(chan struct{})}
	upFake := fake.New(fake.Config{})
	up := notifyingDelete{Adapter: upFake, deleted: make(chan string, 1)}
	e := newEnv(t, Options{BatchSize: 4}, view("down", down), view("up", up))
	// The down pool's sandboxes come first in the pass's listing (by ID).
	for i := range 12 {
		sb := e.create(t, store.Sandbox{ID: fmt.Sprintf("sbx_a%02d", i)})
		e.set(t, sb.ID, func(sb *store.Sandbox) {
			sb.State, sb.Pool, sb.BackendRef = store.StateTerminating, "down", fmt.Sprintf("ref-%d", i)
		})
	}
	inst, err := upFake.Create(t.Context(), adapters.CreateRequest{ID: "sbx_up", Installation: installation})
	if err != nil {
		t.Fatal(err)
	}
	upSandbox := e.create(t, store.Sandbox{ID: "sbx_z"})
	e.set(t, upSandbox.ID, func(sb *store.Sandbox) {
		sb.State, sb.Pool, sb.BackendRef = store.StateTerminating, "up", inst.Ref
	})

	done := make(chan Result, 1)
	go func() {
		r, _ := e.s.TerminateOnce(context.Background())
		done <- r
	}()
	<-down.entered
	select {
	case ref := <-up.deleted:
		if ref != inst.Ref {
			t.Fatalf("deleted %s", ref)
		}
	case <-time.After(30 * time.Second): // a guard against a hang, not a wait for state
		close(down.release)
		t.Fatal("the up pool's delete waited for the down pool's")
	}
	close(down.release)
	if r := <-done; r.Terminated != 13 {
		t.Fatalf("result %+v", r)
	}
	wantState(t, e.get(t, upSandbox.ID), store.StateTerminated)
}

// failingDelete answers every Delete provider_unavailable, counting them.
type failingDelete struct {
	*fake.Adapter
	calls *atomic.Int64
}

func (f failingDelete) Delete(context.Context, string) error {
	f.calls.Add(1)
	return api.Errorf(api.CodeProviderUnavailable, "backend down")
}

// Once a Delete says the pool's backend is down, the pass leaves the pool's other
// sandboxes to the next pass rather than wait out a timeout for each.
func TestTerminateStopsAPoolWhoseBackendIsDown(t *testing.T) {
	var calls atomic.Int64
	e := newEnv(t, Options{BatchSize: 4}, view("down", failingDelete{Adapter: fake.New(fake.Config{}), calls: &calls}))
	for i := range 12 {
		sb := e.create(t, store.Sandbox{})
		e.set(t, sb.ID, func(sb *store.Sandbox) {
			sb.State, sb.Pool, sb.BackendRef = store.StateTerminating, "down", fmt.Sprintf("ref-%d", i)
		})
	}
	r := e.terminate(t)
	if calls.Load() != 1 || r.Errors != 1 || r.Terminated != 0 {
		t.Fatalf("first pass: %d Deletes, result %+v", calls.Load(), r)
	}
	e.terminate(t)
	if calls.Load() != 2 {
		t.Fatalf("second pass: %d Deletes in all", calls.Load())
	}
}
