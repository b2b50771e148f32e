package scheduler

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/different-ai/differently/adapters/fake"
	"github.com/different-ai/differently/server/pools"
	"github.com/different-ai/differently/server/pools/poolstest"
	"github.com/different-ai/differently/server/store"
)

// stalledPools is the pool view of a replica that claimed a batch and then stopped,
// as if killed before placing it: the pass's second call of Views (the first counts
// start slots before the claim, the second is placement's) blocks until released.
type stalledPools struct {
	*poolstest.Pools
	entered, release chan struct{}
	calls            atomic.Int32
}

func (p *stalledPools) Views() []pools.View {
	if p.calls.Add(1) == 2 {
		close(p.entered)
		<-p.release
	}
	return p.Pools.Views()
}

// TestCrashedClaimLapsesAfterClaimLease: a replica that dies between claiming queued
// sandboxes and placing them holds them back for ClaimLease only, not for a whole
// provisioning lease (ProvisionTimeout + 30 s; the reconciler does not see queued
// sandboxes, so nothing else would free them). Found by the three-replica test in
// cmd/differently-server, which killed a replica mid-batch and waited 33 s.
func TestCrashedClaimLapsesAfterClaimLease(t *testing.T) {
	fk := fake.New(fake.Config{})
	e := newEnv(t, Options{ReplicaID: "replica-alive", ProvisionTimeout: 2 * time.Minute}, view("fake", fk))
	stalled := &stalledPools{Pools: e.pools, entered: make(chan struct{}), release: make(chan struct{})}
	dead, err := New(e.st, stalled, e.clk, Options{Installation: installation, ReplicaID: "replica-dead", ProvisionTimeout: 2 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	sb := e.create(t, store.Sandbox{})

	deadDone := make(chan Result)
	go func() {
		r, _ := dead.ProvisionOnce(context.Background())
		deadDone <- r
	}()
	<-stalled.entered // claimed, not placed
	if got := e.get(t, sb.ID); got.ClaimedBy != "replica-dead" || got.State != store.StateQueued {
		t.Fatalf("after the dead replica's claim: %+v", got)
	}

	e.clk.Advance(DefaultClaimLease - time.Second)
	if r := e.provision(t); r.Claimed != 0 {
		t.Fatalf("claimed a sandbox under a live claim: %+v", r)
	}
	e.clk.Advance(time.Second)
	if r := e.provision(t); r != (Result{Pass: PassProvision, Claimed: 1, Started: 1}) {
		t.Fatalf("once the claim lapsed: %+v", r)
	}
	running := e.get(t, sb.ID)
	wantState(t, running, store.StateRunning)

	// The stalled replica wakes up late: its guard sees the sandbox is no longer its
	// own, so it neither creates a second time nor touches the sandbox.
	close(stalled.release)
	if r := <-deadDone; r != (Result{Pass: PassProvision, Claimed: 1}) {
		t.Errorf("late placement: %+v", r)
	}
	if fk.CreateCalls() != 1 || fk.Instances() != 1 {
		t.Errorf("CreateCalls %d, Instances %d; want 1 and 1", fk.CreateCalls(), fk.Instances())
	}
	if got := e.get(t, sb.ID); got.Version != running.Version {
		t.Errorf("the late placement changed the sandbox: %+v", got)
	}
}

// TestProvisioningClaimCoversTheCreate: once placed, the claim lasts ProvisionTimeout
// + 30 s, so a sandbox deleted during a long Create is not marked terminated (and its
// instance leaked) while the Create may still bring the ref.
func TestProvisioningClaimCoversTheCreate(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	fk := fake.New(fake.Config{CreateLatency: time.Nanosecond, Sleep: func(ctx context.Context, _ time.Duration) error {
		close(entered)
		<-release
		return nil
	}})
	e := newEnv(t, Options{ProvisionTimeout: 2 * time.Minute}, view("fake", fk))
	sb := e.create(t, store.Sandbox{})
	done := make(chan Result)
	go func() {
		r, _ := e.s.ProvisionOnce(context.Background())
		done <- r
	}()
	<-entered
	got := e.get(t, sb.ID)
	wantState(t, got, store.StateProvisioning)
	if want := t0.Add(2*time.Minute + provisionLeaseMargin); got.ClaimExpiresAt == nil || !got.ClaimExpiresAt.Equal(want) {
		t.Errorf("claim of a provisioning sandbox expires at %v, want %v", got.ClaimExpiresAt, want)
	}
	e.set(t, sb.ID, toTerminating)
	e.clk.Advance(DefaultClaimLease + time.Second)
	if r := e.terminate(t); r.Terminated != 0 {
		t.Fatalf("terminated while its Create ran: %+v", r)
	}
	close(release)
	<-done
	if r := e.terminate(t); r.Terminated != 1 || fk.Instances() != 0 {
		t.Fatalf("after the Create: %+v, instances %d", r, fk.Instances())
	}
}
