package scheduler

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/adapters/fake"
	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/server/pools"
	"github.com/different-ai/differently/server/store"
)

func TestProvisionHappyPath(t *testing.T) {
	fk := fake.New(fake.Config{Region: "eu-1"})
	e := newEnv(t, Options{}, view("fake", fk))
	sb := e.create(t, store.Sandbox{
		Labels:     map[string]string{"team": "a"},
		Env:        map[string]string{"GREETING": "hi"},
		TTLSeconds: 600,
		Resources:  adapters.Resources{CPU: 1, MemoryMiB: 512},
	})

	r := e.provision(t)
	if r != (Result{Pass: PassProvision, Claimed: 1, Started: 1}) {
		t.Fatalf("result = %+v", r)
	}
	got := e.get(t, sb.ID)
	wantState(t, got, store.StateRunning)
	if got.Pool != "fake" || got.Region != "eu-1" || got.BackendRef == "" || got.Reason != "" ||
		got.ClaimedBy != "" || got.ClaimExpiresAt != nil || got.Attempts != 0 {
		t.Errorf("sandbox = %+v", got)
	}
	if want := t0.Add(600 * time.Second); got.ExpiresAt == nil || !got.ExpiresAt.Equal(want) {
		t.Errorf("expiresAt = %v, want %v", got.ExpiresAt, want)
	}
	inst, err := fk.Inspect(got.BackendRef)
	if err != nil {
		t.Fatal(err)
	}
	wantLabels := map[string]string{
		"team":                     "a",
		adapters.LabelSandboxID:    sb.ID,
		adapters.LabelInstallation: installation,
		adapters.LabelOrg:          "org_1",
		adapters.LabelProject:      "prj_1",
	}
	for k, v := range wantLabels {
		if inst.Labels[k] != v {
			t.Errorf("label %s = %q, want %q (labels %v)", k, inst.Labels[k], v, inst.Labels)
		}
	}
	if inst.Installation != installation || inst.Env["GREETING"] != "hi" || inst.Resources.MemoryMiB != 512 {
		t.Errorf("instance = %+v", inst)
	}
	if r := e.provision(t); r.Claimed != 0 {
		t.Errorf("second pass claimed %d", r.Claimed)
	}
}

// TestProvisionErrorTable drives one injected Create error per row and checks the
// reaction of the adapter specification's table, then that the retry succeeds.
func TestProvisionErrorTable(t *testing.T) {
	tests := []struct {
		code        api.Code
		state       store.State
		attempts    int
		delay       time.Duration
		markUnheal  bool
		result      Result
		wantReason  string
		thenRunning bool
	}{
		{code: api.CodeInsufficientCapacity, state: store.StateQueued, attempts: 0, delay: 2 * time.Second,
			result: Result{Requeued: 1}, thenRunning: true},
		{code: api.CodeSandboxFailed, state: store.StateQueued, attempts: 1, delay: 4 * time.Second,
			result: Result{Requeued: 1}, thenRunning: true},
		{code: api.CodeProviderUnavailable, state: store.StateQueued, attempts: 1, delay: 4 * time.Second,
			markUnheal: true, result: Result{Requeued: 1}, thenRunning: true},
		{code: api.CodeInternal, state: store.StateQueued, attempts: 1, delay: 4 * time.Second,
			markUnheal: true, result: Result{Requeued: 1}, thenRunning: true},
		{code: api.CodeInvalidRequest, state: store.StateFailed, attempts: 1, result: Result{Failed: 1}},
	}
	for _, tt := range tests {
		t.Run(string(tt.code), func(t *testing.T) {
			fk := fake.New(fake.Config{CreateErrors: []api.Code{tt.code}})
			e := newEnv(t, Options{}, view("fake", fk))
			sb := e.create(t, store.Sandbox{})

			r := e.provision(t)
			tt.result.Pass, tt.result.Claimed = PassProvision, 1
			if r != tt.result {
				t.Errorf("result = %+v, want %+v", r, tt.result)
			}
			got := e.get(t, sb.ID)
			wantState(t, got, tt.state)
			if got.Attempts != tt.attempts {
				t.Errorf("attempts = %d, want %d", got.Attempts, tt.attempts)
			}
			if want := "pool fake: fake: injected create failure"; got.Reason != want {
				t.Errorf("reason = %q, want %q", got.Reason, want)
			}
			if got.ClaimedBy != "" || got.ClaimExpiresAt != nil {
				t.Errorf("claim not released: %q %v", got.ClaimedBy, got.ClaimExpiresAt)
			}
			if marked := e.pools.Marked(); tt.markUnheal != slices.Equal(marked, []string{"fake"}) {
				t.Errorf("marked unhealthy = %v, want marked %v", marked, tt.markUnheal)
			}
			// The breaker hears of an outage only, as the pool's health does.
			want := pools.CreateNeutral
			if tt.markUnheal {
				want = pools.CreateOutage
			}
			if got := e.pools.Outcomes(); !slices.Equal(got, []pools.CreateOutcome{want}) {
				t.Errorf("breaker outcomes = %v, want [%v]", got, want)
			}
			if !tt.thenRunning {
				return
			}
			if want := t0.Add(tt.delay); !got.NextAttemptAt.Equal(want) {
				t.Errorf("nextAttemptAt = %v, want %v", got.NextAttemptAt, want)
			}
			if got.Pool != "" {
				t.Errorf("requeued sandbox keeps pool %q", got.Pool)
			}
			e.clk.Advance(tt.delay - time.Microsecond)
			if r := e.provision(t); r.Claimed != 0 {
				t.Fatalf("claimed before the backoff ended: %+v", r)
			}
			e.clk.Advance(time.Microsecond)
			if r := e.provision(t); r.Started != 1 {
				t.Fatalf("retry result = %+v", r)
			}
			got = e.get(t, sb.ID)
			wantState(t, got, store.StateRunning)
			if got.Reason != "" || got.Attempts != tt.attempts {
				t.Errorf("after retry: reason %q attempts %d", got.Reason, got.Attempts)
			}
		})
	}
}

func TestProvisionGivesUpAfterMaxAttempts(t *testing.T) {
	fails := []api.Code{api.CodeSandboxFailed, api.CodeSandboxFailed, api.CodeSandboxFailed}
	fk := fake.New(fake.Config{CreateErrors: fails})
	e := newEnv(t, Options{MaxAttempts: 3}, view("fake", fk))
	sb := e.create(t, store.Sandbox{})

	for attempt, backoff := range []time.Duration{4 * time.Second, 8 * time.Second} {
		e.provision(t)
		got := e.get(t, sb.ID)
		wantState(t, got, store.StateQueued)
		if got.Attempts != attempt+1 || !got.NextAttemptAt.Equal(e.clk.Now().Add(backoff)) {
			t.Fatalf("attempt %d: attempts %d, next %v", attempt+1, got.Attempts, got.NextAttemptAt)
		}
		e.clk.Advance(backoff)
	}
	if r := e.provision(t); r.Failed != 1 {
		t.Fatalf("result = %+v", r)
	}
	got := e.get(t, sb.ID)
	wantState(t, got, store.StateFailed)
	if got.Attempts != 3 || !strings.Contains(got.Reason, "gave up after 3 attempts") ||
		!strings.HasPrefix(got.Reason, "pool fake: fake: injected create failure") {
		t.Errorf("attempts %d, reason %q", got.Attempts, got.Reason)
	}
	if m := e.pools.Marked(); len(m) != 0 {
		t.Errorf("sandbox_failed marked pools unhealthy: %v", m)
	}
	if fk.Instances() != 0 {
		t.Errorf("instances = %d", fk.Instances())
	}
}

func TestBackoff(t *testing.T) {
	want := []time.Duration{2, 4, 8, 16, 32, 64, 64, 64}
	for n, w := range want {
		if got := Backoff(n); got != w*time.Second {
			t.Errorf("Backoff(%d) = %v, want %v", n, got, w*time.Second)
		}
	}
}

func TestProvisionLostResponseMakesOneInstance(t *testing.T) {
	fk := fake.New(fake.Config{DropCreateResponses: 1})
	e := newEnv(t, Options{}, view("fake", fk))
	sb := e.create(t, store.Sandbox{})

	e.provision(t)
	got := e.get(t, sb.ID)
	wantState(t, got, store.StateQueued)
	if got.Attempts != 1 || fk.Instances() != 1 || !slices.Equal(e.pools.Marked(), []string{"fake"}) {
		t.Fatalf("after lost response: attempts %d, instances %d, marked %v", got.Attempts, fk.Instances(), e.pools.Marked())
	}
	e.clk.Advance(Backoff(1))
	e.provision(t)
	got = e.get(t, sb.ID)
	wantState(t, got, store.StateRunning)
	if fk.Instances() != 1 || fk.CreateCalls() != 2 {
		t.Errorf("instances %d, create calls %d", fk.Instances(), fk.CreateCalls())
	}
	if inst, err := fk.Inspect(got.BackendRef); err != nil || inst.SandboxID != sb.ID {
		t.Errorf("backendRef %s: %+v, %v", got.BackendRef, inst, err)
	}
}

func TestProvisionWaitsForCapacity(t *testing.T) {
	fk := fake.New(fake.Config{TotalCPU: 1})
	e := newEnv(t, Options{}, view("fake", fk))
	one := adapters.Resources{CPU: 1}
	first := e.create(t, store.Sandbox{Resources: one})
	e.provision(t)
	wantState(t, e.get(t, first.ID), store.StateRunning)

	second := e.create(t, store.Sandbox{Resources: one})
	if r := e.provision(t); r.Requeued != 1 {
		t.Fatalf("result = %+v", r)
	}
	got := e.get(t, second.ID)
	wantState(t, got, store.StateQueued)
	if got.Reason != "waiting for capacity: pool fake: no capacity" || got.Attempts != 0 ||
		!got.NextAttemptAt.Equal(t0.Add(RequeueDelay)) || fk.CreateCalls() != 1 {
		t.Errorf("waiting sandbox = %+v, create calls %d", got, fk.CreateCalls())
	}
}

// Two sandboxes placed in one pass both see the room for one; the adapter's
// insufficient_capacity then requeues the loser uncounted.
func TestProvisionSamePassOverflow(t *testing.T) {
	fk := fake.New(fake.Config{TotalCPU: 1})
	e := newEnv(t, Options{}, view("fake", fk))
	one := adapters.Resources{CPU: 1}
	a, b := e.create(t, store.Sandbox{Resources: one}), e.create(t, store.Sandbox{Resources: one})
	if r := e.provision(t); r.Started != 1 || r.Requeued != 1 {
		t.Fatalf("result = %+v", r)
	}
	loser := e.get(t, b.ID)
	if loser.State == store.StateRunning {
		loser = e.get(t, a.ID)
	}
	wantState(t, loser, store.StateQueued)
	if loser.Attempts != 0 || !strings.HasPrefix(loser.Reason, "pool fake: fake: 1 CPU") {
		t.Errorf("loser = %+v", loser)
	}
}

func TestProvisionPlacementFailure(t *testing.T) {
	fk := fake.New(fake.Config{})
	e := newEnv(t, Options{}, view("fake", fk))
	sb := e.create(t, store.Sandbox{Capabilities: []string{adapters.FeatureGPU}})
	if r := e.provision(t); r.Failed != 1 {
		t.Fatalf("result = %+v", r)
	}
	got := e.get(t, sb.ID)
	wantState(t, got, store.StateFailed)
	if got.Reason != "no pool can place this sandbox: pool fake: missing capabilities: gpu" || fk.CreateCalls() != 0 {
		t.Errorf("reason %q, create calls %d", got.Reason, fk.CreateCalls())
	}
}

// After insufficient_capacity the next attempt goes to the next ranked pool, on
// whichever replica makes it: the pool to avoid is kept in the sandbox's row.
func TestProvisionTriesNextPoolAfterCapacityShortage(t *testing.T) {
	for _, tc := range []struct {
		name      string
		otherNext bool // another replica claims the sandbox after the shortage
	}{
		{"same replica", false},
		{"another replica", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			full := fake.New(fake.Config{CreateErrors: []api.Code{api.CodeInsufficientCapacity}})
			other := fake.New(fake.Config{})
			e := newEnv(t, Options{}, view("a", full), view("b", other))
			next := e.s
			if tc.otherNext {
				var err error
				next, err = New(e.st, e.pools, e.clk, Options{Installation: installation, ReplicaID: "replica-2"})
				if err != nil {
					t.Fatal(err)
				}
			}
			sb := e.create(t, store.Sandbox{})
			e.provision(t)
			got := e.get(t, sb.ID)
			wantState(t, got, store.StateQueued)
			if got.AvoidPool != "a" || got.AvoidUntil == nil || !got.AvoidUntil.Equal(e.clk.Now().Add(avoidFor)) {
				t.Fatalf("after the shortage the row avoids %q until %v", got.AvoidPool, got.AvoidUntil)
			}
			e.clk.Advance(RequeueDelay)
			if _, err := next.ProvisionOnce(context.Background()); err != nil {
				t.Fatal(err)
			}
			got = e.get(t, sb.ID)
			wantState(t, got, store.StateRunning)
			if got.Pool != "b" || other.Instances() != 1 || full.Instances() != 0 {
				t.Errorf("pool %q, instances a=%d b=%d", got.Pool, full.Instances(), other.Instances())
			}
			if got.AvoidPool != "" || got.AvoidUntil != nil {
				t.Errorf("a running sandbox still avoids %q until %v", got.AvoidPool, got.AvoidUntil)
			}
		})
	}
}

// The pool that ran short is ranked last only for a while; after that, and for
// other sandboxes, the ranking is placement's.
func TestPreferOthers(t *testing.T) {
	now := t0
	until := now.Add(avoidFor)
	avoiding := store.Sandbox{AvoidPool: "a", AvoidUntil: &until}
	for _, tc := range []struct {
		name   string
		sb     store.Sandbox
		ranked []string
		now    time.Time
		want   []string
	}{
		{"avoided pool goes last", avoiding, []string{"a", "b", "c"}, now, []string{"b", "c", "a"}},
		{"expired", avoiding, []string{"a", "b"}, until, []string{"a", "b"}},
		{"only candidate stays", avoiding, []string{"a"}, now, []string{"a"}},
		{"not ranked", avoiding, []string{"b", "c"}, now, []string{"b", "c"}},
		{"nothing to avoid", store.Sandbox{}, []string{"a", "b"}, now, []string{"a", "b"}},
		{"no end time", store.Sandbox{AvoidPool: "a"}, []string{"a", "b"}, now, []string{"a", "b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := preferOthers(tc.sb, tc.ranked, tc.now); !slices.Equal(got, tc.want) {
				t.Errorf("preferOthers = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestProvisionRespectsMaxStarting(t *testing.T) {
	a, b := fake.New(fake.Config{}), fake.New(fake.Config{})
	va, vb := view("a", a), view("b", b)
	va.Pool.MaxStarting, vb.Pool.MaxStarting = 1, 1
	e := newEnv(t, Options{}, va, vb)
	onA := e.create(t, store.Sandbox{Placement: store.Placement{AllowedPools: []string{"a"}}})
	// Other Creates hold both pools' only start slots: the pass claims nothing, since
	// it could start nothing.
	if !e.s.acquire(va) || !e.s.acquire(vb) {
		t.Fatal("could not take the slots")
	}
	if r := e.provision(t); r.Claimed != 0 {
		t.Fatalf("with no start slot free the pass claimed: %+v", r)
	}
	wantState(t, e.get(t, onA.ID), store.StateQueued)

	// b's slot frees, but the sandbox may only go to a: claimed, then handed back
	// uncounted for a later pass.
	e.s.releaseSlot("b")
	if r := e.provision(t); r.Requeued != 1 {
		t.Fatalf("result = %+v", r)
	}
	got := e.get(t, onA.ID)
	wantState(t, got, store.StateQueued)
	if !strings.Contains(got.Reason, "maxStarting") || got.Attempts != 0 || got.ClaimedBy != "" {
		t.Errorf("reason %q attempts %d claimed by %q", got.Reason, got.Attempts, got.ClaimedBy)
	}
	// Due at once: the pass after a's slot frees starts it, with no delay.
	e.s.releaseSlot("a")
	e.provision(t)
	wantState(t, e.get(t, onA.ID), store.StateRunning)
}

// A freed start slot wakes the provisioning loop when a pass may have left
// sandboxes queued for want of one, and only then.
func TestReleaseSlotWakesProvisioning(t *testing.T) {
	v := view("fake", fake.New(fake.Config{}))
	v.Pool.MaxStarting = 1
	e := newEnv(t, Options{}, v)
	woken := func() bool {
		select {
		case <-e.s.wakeProvision:
			return true
		default:
			return false
		}
	}
	if !e.s.acquire(v) {
		t.Fatal("could not take a slot")
	}
	woken()
	e.s.releaseSlot("fake")
	if woken() {
		t.Fatal("releasing a slot nobody waited for woke the provisioning loop")
	}
	// A pass that finds no slot free leaves the next release to wake the loop.
	if !e.s.acquire(v) {
		t.Fatal("could not take a slot")
	}
	e.create(t, store.Sandbox{})
	if r := e.provision(t); r.Claimed != 0 {
		t.Fatalf("pass without a free slot = %+v", r)
	}
	e.s.releaseSlot("fake")
	if !woken() {
		t.Fatal("releasing a slot a pass waited for did not wake the provisioning loop")
	}
	if r := e.provision(t); r.Started != 1 {
		t.Fatalf("pass after the release = %+v", r)
	}
}

func TestProvisionFromSnapshot(t *testing.T) {
	ctx := context.Background()
	a, b := fake.New(fake.Config{}), fake.New(fake.Config{})
	e := newEnv(t, Options{}, view("a", a), view("b", b))
	inst, err := b.Create(ctx, adapters.CreateRequest{ID: "sbx_source", Installation: installation})
	if err != nil {
		t.Fatal(err)
	}
	snap, err := b.Snapshot(ctx, inst.Ref, adapters.SnapshotDisk)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.st.CreateSnapshot(ctx, t0, store.Snapshot{ID: "snap_1", SandboxID: "sbx_source",
		Pool: "b", BackendRef: snap.Ref, Kind: "disk", State: "ready"}); err != nil {
		t.Fatal(err)
	}
	sb := e.create(t, store.Sandbox{FromSnapshot: "snap_1"})
	missing := e.create(t, store.Sandbox{ID: "sbx_missing", FromSnapshot: "snap_gone"})
	e.provision(t)

	got := e.get(t, sb.ID)
	wantState(t, got, store.StateRunning)
	if got.Pool != "b" || a.CreateCalls() != 0 {
		t.Errorf("restored on pool %q; creates on a: %d", got.Pool, a.CreateCalls())
	}
	got = e.get(t, missing.ID)
	wantState(t, got, store.StateFailed)
	if got.Reason != "snapshot snap_gone does not exist" {
		t.Errorf("reason %q", got.Reason)
	}
}

// A sandbox deleted while its Create ran stays terminating with the instance's ref,
// so the terminator deletes the instance. The write of the Create's outcome starts
// from the sandbox as provisioning left it, which the delete made stale: on a store
// that runs the write's callback on that value first, the run on the stored value
// decides.
func TestProvisionDeletedDuringCreate(t *testing.T) {
	for _, tc := range []struct {
		name string
		wrap func(store.Store) store.Store
	}{
		{"as stored", nil},
		{"after a run on the stale value", func(st store.Store) store.Store { return staleKnown{st} }},
	} {
		t.Run(tc.name, func(t *testing.T) { testProvisionDeletedDuringCreate(t, tc.wrap) })
	}
}

func testProvisionDeletedDuringCreate(t *testing.T, wrap func(store.Store) store.Store) {
	var e *env
	var id string
	fk := fake.New(fake.Config{CreateLatency: time.Nanosecond, Sleep: func(context.Context, time.Duration) error {
		_, err := e.st.UpdateSandbox(context.Background(), id, e.clk.Now(), func(sb *store.Sandbox) error {
			sb.State = store.StateTerminating
			return nil
		})
		return err
	}})
	e = newEnvWrapped(t, wrap, Options{}, view("fake", fk))
	id = e.create(t, store.Sandbox{}).ID

	if r := e.provision(t); r.Started != 0 || r.Claimed != 1 {
		t.Fatalf("result = %+v", r)
	}
	got := e.get(t, id)
	wantState(t, got, store.StateTerminating)
	if got.BackendRef == "" || got.ClaimedBy != "" {
		t.Fatalf("sandbox = %+v", got)
	}
	if r := e.terminate(t); r.Terminated != 1 {
		t.Fatalf("terminate result = %+v", r)
	}
	wantState(t, e.get(t, id), store.StateTerminated)
	if fk.Instances() != 0 {
		t.Errorf("instances = %d", fk.Instances())
	}
}

// maxConcurrency counts the pool's live sandboxes, read from the store each pass: a
// full pool makes the sandbox wait, and a sandbox ending frees its place.
func TestProvisionRespectsMaxConcurrency(t *testing.T) {
	v := view("fake", fake.New(fake.Config{}))
	v.Pool.MaxConcurrency = 1
	e := newEnv(t, Options{}, v)
	first := e.create(t, store.Sandbox{})
	if r := e.provision(t); r.Started != 1 {
		t.Fatalf("first pass: %+v", r)
	}
	e.clk.Advance(time.Millisecond)
	second := e.create(t, store.Sandbox{})
	if r := e.provision(t); r.Requeued != 1 {
		t.Fatalf("with the pool full: %+v", r)
	}
	if got := e.get(t, second.ID); got.State != store.StateQueued || !strings.Contains(got.Reason, "maxConcurrency") {
		t.Fatalf("second sandbox %s: %q", got.State, got.Reason)
	}
	e.set(t, first.ID, func(sb *store.Sandbox) { sb.State = store.StateTerminated })
	e.clk.Advance(RequeueDelay)
	if r := e.provision(t); r.Started != 1 {
		t.Fatalf("after the first ended: %+v", r)
	}
}

// Options.DefaultMaxStarting (the config's scheduler.defaultMaxStarting) bounds the
// Creates of a pool that sets no maxStarting of its own.
func TestDefaultMaxStartingApplies(t *testing.T) {
	v := view("fake", fake.New(fake.Config{}))
	e := newEnv(t, Options{DefaultMaxStarting: 1}, v)
	sb := e.create(t, store.Sandbox{})
	if !e.s.acquire(v) {
		t.Fatal("could not take the only slot")
	}
	if e.s.acquire(v) {
		t.Fatal("a second slot was granted with defaultMaxStarting 1")
	}
	if r := e.provision(t); r.Claimed != 0 {
		t.Fatalf("claimed with the only slot taken: %+v", r)
	}
	e.s.releaseSlot("fake")
	e.provision(t)
	wantState(t, e.get(t, sb.ID), store.StateRunning)
}

// blankCreate answers its first Creates without the instance's reference, after
// making the instance.
type blankCreate struct {
	*fake.Adapter
	blank     int
	sandboxID string // answered instead of the request's, when set
}

func (b *blankCreate) Create(ctx context.Context, req adapters.CreateRequest) (adapters.Instance, error) {
	inst, err := b.Adapter.Create(ctx, req)
	if err == nil && b.blank > 0 {
		b.blank--
		if b.sandboxID != "" {
			inst.SandboxID = b.sandboxID
		} else {
			inst.Ref = ""
		}
	}
	return inst, err
}

// A Create that answers with no instance reference, or with another sandbox's
// instance, did not start the sandbox: it is retried like an outage, and the retry,
// keyed by the sandbox's ID, finds the instance the bad answer hid.
func TestProvisionRefusesAnAnswerWithoutItsInstance(t *testing.T) {
	for _, other := range []string{"", "sbx_someone_else"} {
		fk := fake.New(fake.Config{})
		e := newEnv(t, Options{}, view("fake", &blankCreate{Adapter: fk, blank: 1, sandboxID: other}))
		sb := e.create(t, store.Sandbox{})
		e.provision(t)
		got := e.get(t, sb.ID)
		wantState(t, got, store.StateQueued)
		if got.Attempts != 1 || got.BackendRef != "" || !strings.Contains(got.Reason, "Create answered") {
			t.Fatalf("after the bad answer (%q): %+v", other, got)
		}
		e.clk.Advance(Backoff(1))
		e.provision(t)
		got = e.get(t, sb.ID)
		wantState(t, got, store.StateRunning)
		if inst, err := fk.Inspect(got.BackendRef); err != nil || inst.SandboxID != sb.ID || fk.Instances() != 1 {
			t.Errorf("backendRef %q: %+v, %v; %d instances", got.BackendRef, inst, err, fk.Instances())
		}
	}
}

// deadlineCreate records the deadline of each Create's context.
type deadlineCreate struct {
	*fake.Adapter
	mu        sync.Mutex
	deadlines []time.Time
}

func (d *deadlineCreate) Create(ctx context.Context, req adapters.CreateRequest) (adapters.Instance, error) {
	dl, _ := ctx.Deadline()
	d.mu.Lock()
	d.deadlines = append(d.deadlines, dl)
	d.mu.Unlock()
	return d.Adapter.Create(ctx, req)
}

// The Create ends provisionLeaseMargin before its claim does, however late it began:
// once the claim lapses the reconciler may adopt or requeue the sandbox. One that
// would have less than nothing left is not made, and the sandbox is requeued
// uncounted.
func TestCreateEndsBeforeItsClaim(t *testing.T) {
	a := &deadlineCreate{Adapter: fake.New(fake.Config{})}
	e := newEnv(t, Options{ProvisionTimeout: time.Minute}, view("p", a))
	claimedFor := func(d time.Duration) job {
		sb := e.create(t, store.Sandbox{})
		exp := e.clk.Now().Add(d)
		e.set(t, sb.ID, func(cur *store.Sandbox) {
			cur.State, cur.Pool, cur.ClaimedBy, cur.ClaimExpiresAt = store.StateProvisioning, "p", "replica-1", &exp
		})
		sb = e.get(t, sb.ID)
		v, _ := e.pools.View("p")
		e.s.acquire(v)
		return job{sb: sb, view: v, req: e.s.createRequest(sb, "")}
	}

	before := time.Now()
	if o, _ := e.s.create(t.Context(), claimedFor(provisionLeaseMargin+20*time.Second)); o != outStarted {
		t.Fatalf("outcome %v", o)
	}
	after := time.Now()
	if dl := a.deadlines[0]; dl.Before(before.Add(20*time.Second)) || dl.After(after.Add(20*time.Second)) {
		t.Fatalf("Create's deadline %v from now, want 20 s (the claim's time left less the margin)", dl.Sub(before))
	}

	j := claimedFor(provisionLeaseMargin - time.Second)
	if o, _ := e.s.create(t.Context(), j); o != outRequeued {
		t.Fatalf("outcome %v, want requeued", o)
	}
	if len(a.deadlines) != 1 {
		t.Fatal("a Create was made with no time left on its claim")
	}
	sb := e.get(t, j.sb.ID)
	wantState(t, sb, store.StateQueued)
	if sb.Attempts != 0 || sb.ClaimedBy != "" {
		t.Fatalf("requeued with %d attempts, claimed by %q", sb.Attempts, sb.ClaimedBy)
	}
}
