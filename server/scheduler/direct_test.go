package scheduler

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/different-ai/differently/adapters/fake"
	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/internal/ids"
	"github.com/different-ai/differently/server/lifecycle"
	"github.com/different-ai/differently/server/pools"
	"github.com/different-ai/differently/server/store"
)

// openDirect lets the env's scheduler take direct work as Run would, without its
// loops, and stops it (waiting for the work in flight) at the end of the test.
func openDirect(t *testing.T, e *env) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	e.s.direct.open(ctx)
	t.Cleanup(func() {
		cancel()
		e.s.direct.close()
	})
}

// admit stores sb as the API does, with the admission callback given (nil: none).
func (e *env) admit(t *testing.T, sb store.Sandbox, admit func(store.Admission, *store.Sandbox) error) store.Sandbox {
	t.Helper()
	if admit == nil {
		admit = func(store.Admission, *store.Sandbox) error { return nil }
	}
	out, _, err := e.st.CreateSandboxAdmitted(context.Background(), e.clk.Now(), sb, admit)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// deleting moves sb to terminating as the API's delete does, with a Delete of this
// replica prepared in the transaction, and returns both.
func (e *env) deleting(t *testing.T, sb store.Sandbox) (*Delete, store.Sandbox) {
	t.Helper()
	d := e.s.ReserveDelete()
	out, err := e.st.UpdateSandbox(context.Background(), sb.ID, e.clk.Now(), func(cur *store.Sandbox) error {
		cur.State = store.StateTerminating
		d.Prepare(cur, e.clk.Now(), lifecycle.Token("tok_test"))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return d, out
}

// place is the admission of a create that starts at once on r's pool.
func place(r *Start) func(store.Admission, *store.Sandbox) error {
	return func(_ store.Admission, ins *store.Sandbox) error { return r.Place(ins, nil) }
}

func newQueued() store.Sandbox {
	return store.Sandbox{ID: ids.New("sbx"), Org: "org_1", Project: "prj_1", State: store.StateQueued}
}

func (e *env) slotsInUse() int {
	e.s.mu.Lock()
	defer e.s.mu.Unlock()
	n := 0
	for _, v := range e.s.starting {
		n += v
	}
	return n
}

func receive(t *testing.T, c <-chan store.Sandbox) (store.Sandbox, bool) {
	t.Helper()
	if c == nil {
		t.Fatal("no direct work started")
	}
	select {
	case sb, ok := <-c:
		return sb, ok
	case <-time.After(time.Minute):
		t.Fatal("direct work did not end within a minute")
	}
	return store.Sandbox{}, false
}

func TestReserveNeedsRun(t *testing.T) {
	e := newEnv(t, Options{}, view("fake", fake.New(fake.Config{})))
	if r := e.s.Reserve(t.Context(), []string{"fake"}); r != nil {
		t.Fatal("Reserve took work while Run was not running")
	}
	if d := e.s.ReserveDelete(); d != nil {
		t.Fatal("ReserveDelete took work while Run was not running")
	}
}

func TestDirectStartRuns(t *testing.T) {
	fk := fake.New(fake.Config{Region: "eu-1"})
	e := newEnv(t, Options{}, view("fake", fk))
	openDirect(t, e)
	sb := newQueued()
	r := e.s.Reserve(t.Context(), []string{"fake"})
	if r == nil {
		t.Fatal("Reserve = nil with a free slot")
	}
	stored := e.admit(t, sb, place(r))
	if stored.State != store.StateProvisioning || stored.Pool != "fake" || stored.ClaimedBy != "replica-1" || stored.ClaimExpiresAt == nil {
		t.Fatalf("stored sandbox = %+v", stored)
	}
	got, ok := receive(t, r.Start(stored))
	if !ok {
		t.Fatal("the Create's outcome was not delivered")
	}
	wantState(t, got, store.StateRunning)
	if got.BackendRef == "" || got.Region != "eu-1" || got.ClaimedBy != "" || fk.Instances() != 1 {
		t.Fatalf("running sandbox = %+v, instances %d", got, fk.Instances())
	}
	if db := e.get(t, sb.ID); db.State != store.StateRunning || db.Version != got.Version {
		t.Fatalf("stored %+v, delivered %+v", db, got)
	}
	if n := e.slotsInUse(); n != 0 {
		t.Fatalf("%d start slots still held", n)
	}
	r.Release() // after Start: nothing
	if n := e.slotsInUse(); n != 0 {
		t.Fatalf("Release after Start changed the slots: %d", n)
	}
	if n := testutil.ToFloat64(e.s.m.direct.WithLabelValues("create")); n != 1 {
		t.Fatalf("differently_direct_work_total{work=create} = %v", n)
	}
}

// The claim of a direct create runs from when the API stores the sandbox, not from
// the Reserve before it: time spent waiting to be stored does not come out of the
// margin in which the Create's outcome is recorded.
func TestDirectStartClaimsFromTheInsert(t *testing.T) {
	e := newEnv(t, Options{ProvisionTimeout: time.Minute}, view("fake", fake.New(fake.Config{})))
	openDirect(t, e)
	sb := newQueued()
	r := e.s.Reserve(t.Context(), []string{"fake"})
	if r == nil {
		t.Fatal("Reserve = nil with a free slot")
	}
	defer r.Release()
	e.clk.Advance(20 * time.Second) // waiting for the store
	stored := e.admit(t, sb, place(r))
	if want := e.clk.Now().Add(time.Minute + provisionLeaseMargin); stored.ClaimExpiresAt == nil || !stored.ClaimExpiresAt.Equal(want) || stored.ClaimedBy != "replica-1" {
		t.Fatalf("claim in the insert: %s until %v, want replica-1 until %v", stored.ClaimedBy, stored.ClaimExpiresAt, want)
	}
}

func TestReserveDeclines(t *testing.T) {
	tests := []struct {
		name   string
		setup  func(e *env)
		ranked []string
	}{
		{name: "no free slot", ranked: []string{"fake"}, setup: func(e *env) {
			e.s.starting["fake"] = 1
		}},
		{name: "unknown pool", ranked: []string{"gone"}},
		{name: "pool unhealthy", ranked: []string{"fake"}, setup: func(e *env) {
			e.pools.Update("fake", func(v *pools.View) { v.Healthy = false })
		}},
		{name: "pool with maxConcurrency", ranked: []string{"fake"}, setup: func(e *env) {
			e.pools.Update("fake", func(v *pools.View) { v.Pool.MaxConcurrency = 10 })
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := view("fake", fake.New(fake.Config{}))
			v.Pool.MaxStarting = 1
			e := newEnv(t, Options{}, v)
			openDirect(t, e)
			if tt.setup != nil {
				tt.setup(e)
			}
			before := e.slotsInUse()
			if r := e.s.Reserve(t.Context(), tt.ranked); r != nil {
				t.Fatal("Reserve took a slot")
			}
			if e.slotsInUse() != before {
				t.Fatal("a declined Reserve kept a slot")
			}
		})
	}
}

// Another sandbox queued first: the API queues the new one instead (no Place), and
// Start then starts nothing and gives the slot back.
func TestDirectStartQueuedInstead(t *testing.T) {
	fk := fake.New(fake.Config{})
	e := newEnv(t, Options{}, view("fake", fk))
	openDirect(t, e)
	sb := newQueued()
	r := e.s.Reserve(t.Context(), []string{"fake"})
	stored := e.admit(t, sb, nil)
	if stored.State != store.StateQueued || stored.Pool != "" || stored.ClaimedBy != "" || stored.ClaimExpiresAt != nil {
		t.Fatalf("stored %+v, want it queued and unclaimed", stored)
	}
	if c := r.Start(stored); c != nil {
		t.Fatal("Start began a Create for a queued sandbox")
	}
	if n := e.slotsInUse(); n != 0 || fk.Instances() != 0 {
		t.Fatalf("slots %d, instances %d", n, fk.Instances())
	}
	// The pass takes it from the queue as usual.
	if res := e.provision(t); res.Started != 1 {
		t.Fatalf("pass = %+v", res)
	}
}

// A direct Create reacts to the adapter's error codes as a pass does.
func TestDirectStartErrors(t *testing.T) {
	tests := []struct {
		code     api.Code
		state    store.State
		attempts int
	}{
		{api.CodeSandboxFailed, store.StateQueued, 1},
		{api.CodeInsufficientCapacity, store.StateQueued, 0},
		{api.CodeInvalidRequest, store.StateFailed, 1},
	}
	for _, tt := range tests {
		t.Run(string(tt.code), func(t *testing.T) {
			e := newEnv(t, Options{}, view("fake", fake.New(fake.Config{CreateErrors: []api.Code{tt.code}})))
			openDirect(t, e)
			sb := newQueued()
			r := e.s.Reserve(t.Context(), []string{"fake"})
			got, ok := receive(t, r.Start(e.admit(t, sb, place(r))))
			if !ok {
				t.Fatal("no outcome delivered")
			}
			wantState(t, got, tt.state)
			if got.Attempts != tt.attempts || got.ClaimedBy != "" || got.Reason == "" {
				t.Fatalf("after %s: %+v", tt.code, got)
			}
		})
	}
}

// Run's end waits for direct work in flight, whose Create sees the shutdown and
// hands the sandbox back to the queue.
func TestDirectStartShutdown(t *testing.T) {
	release := make(chan struct{})
	fk := fake.New(fake.Config{CreateLatency: time.Hour, Sleep: func(ctx context.Context, _ time.Duration) error {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-release:
			return nil
		}
	}})
	e := newEnv(t, Options{}, view("fake", fk))
	ctx, cancel := context.WithCancel(context.Background())
	e.s.direct.open(ctx)
	sb := newQueued()
	r := e.s.Reserve(t.Context(), []string{"fake"})
	c := r.Start(e.admit(t, sb, place(r)))
	cancel()
	e.s.direct.close()
	select {
	case got, ok := <-c:
		if !ok {
			t.Fatal("no outcome delivered")
		}
		wantState(t, got, store.StateQueued)
		if !strings.Contains(got.Reason, "shutdown") || got.Attempts != 0 {
			t.Fatalf("after shutdown: %+v", got)
		}
	default:
		t.Fatal("close returned before the direct Create ended")
	}
	close(release)
	if e.s.ReserveDelete() != nil {
		t.Fatal("direct work taken after close")
	}
}

func TestDirectDelete(t *testing.T) {
	fk := fake.New(fake.Config{})
	e := newEnv(t, Options{}, view("fake", fk))
	openDirect(t, e)
	d, out := e.deleting(t, running(t, e, store.Sandbox{}))
	if out.State != store.StateTerminating || out.ClaimedBy != "replica-1" {
		t.Fatalf("prepared %+v, want terminating under this replica's claim", out)
	}
	// A pass, on this replica or another, leaves a claimed deletion alone.
	other, err := New(e.st, e.pools, e.clk, Options{Installation: installation, ReplicaID: "replica-2"})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := other.TerminateOnce(context.Background()); err != nil || res.Terminated != 0 {
		t.Fatalf("another replica's pass = %+v, %v", res, err)
	}
	got, ok := receive(t, d.Start(out))
	if !ok {
		t.Fatal("no outcome delivered")
	}
	wantState(t, got, store.StateTerminated)
	if got.ClaimedBy != "" || fk.Instances() != 0 {
		t.Fatalf("terminated %+v, instances %d", got, fk.Instances())
	}
	if n := testutil.ToFloat64(e.s.m.direct.WithLabelValues("delete")); n != 1 {
		t.Fatalf("differently_direct_work_total{work=delete} = %v", n)
	}
}

// Prepare's other cases: nothing to delete ends the sandbox at once; a Create in
// flight, or another replica's live deletion claim, leaves it to whoever holds it.
func TestDirectDeletePrepare(t *testing.T) {
	now := t0
	live := now.Add(time.Minute)
	past := now.Add(-time.Second)
	tests := []struct {
		name      string
		sb        store.Sandbox
		nilDelete bool
		state     store.State
		claimedBy string
	}{
		{name: "queued", sb: store.Sandbox{}, state: store.StateTerminated},
		{name: "queued, no scheduler", sb: store.Sandbox{}, nilDelete: true, state: store.StateTerminated},
		{name: "queued under a placement claim", sb: store.Sandbox{ClaimedBy: "replica-2", ClaimExpiresAt: &live}, state: store.StateTerminated},
		{name: "create in flight", sb: store.Sandbox{Pool: "fake", ClaimedBy: "replica-2", ClaimExpiresAt: &live}, state: store.StateTerminating, claimedBy: "replica-2"},
		{name: "create claim lapsed", sb: store.Sandbox{Pool: "fake", ClaimedBy: "replica-2", ClaimExpiresAt: &past}, state: store.StateTerminated},
		{name: "instance", sb: store.Sandbox{Pool: "fake", BackendRef: "ref"}, state: store.StateTerminating, claimedBy: "replica-1"},
		{name: "instance, no scheduler", sb: store.Sandbox{Pool: "fake", BackendRef: "ref"}, nilDelete: true, state: store.StateTerminating},
		{name: "instance claimed elsewhere", sb: store.Sandbox{Pool: "fake", BackendRef: "ref", ClaimedBy: "replica-2", ClaimExpiresAt: &live}, state: store.StateTerminating, claimedBy: "replica-2"},
		{name: "instance, claim lapsed", sb: store.Sandbox{Pool: "fake", BackendRef: "ref", ClaimedBy: "replica-2", ClaimExpiresAt: &past}, state: store.StateTerminating, claimedBy: "replica-1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, Options{}, view("fake", fake.New(fake.Config{})))
			openDirect(t, e)
			var d *Delete
			if !tt.nilDelete {
				d = e.s.ReserveDelete()
				defer d.Release()
			}
			cur := tt.sb
			cur.State = store.StateTerminating
			d.Prepare(&cur, now, lifecycle.Token("tok_test"))
			if cur.State != tt.state || cur.ClaimedBy != tt.claimedBy {
				t.Fatalf("prepared %s claimed by %q, want %s claimed by %q", cur.State, cur.ClaimedBy, tt.state, tt.claimedBy)
			}
		})
	}
}

// A failed direct Delete leaves the sandbox terminating with the reason and without
// its claim, for the passes to retry.
func TestDirectDeleteFails(t *testing.T) {
	fk := &flakyDelete{Adapter: fake.New(fake.Config{}), failures: 1}
	e := newEnv(t, Options{}, view("fake", fk))
	openDirect(t, e)
	d, out := e.deleting(t, running(t, e, store.Sandbox{}))
	got, ok := receive(t, d.Start(out))
	if !ok {
		t.Fatal("no outcome delivered")
	}
	wantState(t, got, store.StateTerminating)
	if got.ClaimedBy != "" || !strings.HasPrefix(got.Reason, deleteFailedPrefix) {
		t.Fatalf("after a failed Delete: %+v", got)
	}
	if res := e.terminate(t); res.Terminated != 1 {
		t.Fatalf("retrying pass = %+v", res)
	}
}

// Changed wakes the loops as Wake does, but not for a deletion a replica holds.
func TestChangedWakes(t *testing.T) {
	tests := []struct {
		c                    store.Change
		provision, housekeep bool
	}{
		{c: store.Change{Kind: store.ChangeSandbox, State: store.StateQueued}, provision: true},
		{c: store.Change{Kind: store.ChangeSandbox, State: store.StateTerminating}, housekeep: true},
		{c: store.Change{Kind: store.ChangeSandbox, State: store.StateTerminating, Claimed: true}},
		{c: store.Change{Kind: store.ChangeSandbox, State: store.StateRunning}},
		{c: store.Change{Kind: store.ChangeToken, State: store.StateQueued}},
	}
	for _, tt := range tests {
		e := newEnv(t, Options{})
		e.s.Changed(tt.c)
		if got := len(e.s.wakeProvision) == 1; got != tt.provision {
			t.Errorf("%+v: provisioning woken %v, want %v", tt.c, got, tt.provision)
		}
		if got := len(e.s.wakeHousekeep) == 1; got != tt.housekeep {
			t.Errorf("%+v: housekeeping woken %v, want %v", tt.c, got, tt.housekeep)
		}
	}
}
