package storetest

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/internal/ids"
	"github.com/different-ai/differently/server/store"
)

// warmRunning stores a running warm sandbox of project on pool, running since at.
func warmRunning(t *testing.T, s store.Store, project, pool string, at time.Time) store.Sandbox {
	t.Helper()
	sb := store.Sandbox{ID: ids.At("sbx", at), Org: store.WarmOrg, Project: project, State: store.StateRunning,
		Pool: pool, BackendRef: "ref-" + fmt.Sprint(at.UnixNano()), Template: "python",
		Resources: adapters.Resources{CPU: 1}}
	out, _, err := s.CreateSandbox(ctxFor(t), at, sb)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// claimAs makes ins from warm as server/lifecycle.Claim does, for the store's tests.
func claimAs(_ store.Admission, warm store.Sandbox, ins *store.Sandbox) error {
	ins.State, ins.Pool, ins.BackendRef = store.StateRunning, warm.Pool, warm.BackendRef
	ins.Pending = append(ins.Pending, store.Event{Type: store.EventClaimed, To: store.StateRunning, Pool: warm.Pool})
	return nil
}

func tenantSandbox(key string) store.Sandbox {
	return store.Sandbox{ID: "ignored", Org: "org1", Project: "proj1", Template: "python",
		Resources: adapters.Resources{CPU: 1}, IdempotencyKey: key}
}

// testWarmClaim: a claim takes the warm sandbox that has waited longest, under its ID,
// as a new sandbox of the tenant with the claim's event; the warm row is gone; a
// repeated idempotency key gets the sandbox back; a refusing callback writes nothing;
// a shape with none left answers ErrNoWarm.
func testWarmClaim(t *testing.T, d Driver) {
	ctx := ctxFor(t)
	s := d.New(t)
	older := warmRunning(t, s, "alpha.k1", "alpha", t0)
	newer := warmRunning(t, s, "alpha.k1", "alpha", t0.Add(time.Second))
	warmRunning(t, s, "alpha.k2", "alpha", t0) // another shape
	warmRunning(t, s, "beta.k1", "beta", t0)   // another pool

	boom := errors.New("refused")
	if _, _, err := s.ClaimWarm(ctx, t0.Add(time.Minute), tenantSandbox(""), "alpha", "alpha.k1",
		func(store.Admission, store.Sandbox, *store.Sandbox) error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("refusing claim: %v, want its error", err)
	}
	if got := must[store.Sandbox](t)(s.GetSandbox(ctx, older.ID)); got.Org != store.WarmOrg {
		t.Fatalf("after a refused claim the warm sandbox is %s/%s, want untouched", got.Org, got.Project)
	}

	now := t0.Add(time.Hour)
	out, created, err := s.ClaimWarm(ctx, now, tenantSandbox("k"), "alpha", "alpha.k1", claimAs)
	if err != nil || !created {
		t.Fatalf("claim: created %v, %v", created, err)
	}
	if out.ID != older.ID || out.Org != "org1" || out.Project != "proj1" || out.State != store.StateRunning ||
		out.BackendRef != older.BackendRef || out.Version != 1 || !out.CreatedAt.Equal(ts(now)) {
		t.Fatalf("claimed %+v, want the older warm sandbox %s as org1/proj1's, running, created now", out, older.ID)
	}
	if got := must[store.Sandbox](t)(s.GetSandbox(ctx, older.ID)); got.Org != "org1" {
		t.Fatalf("stored %s/%s, want the tenant's", got.Org, got.Project)
	}
	events, _, err := s.ListEvents(ctx, store.EventFilter{SandboxID: older.ID, Org: "org1"})
	if err != nil || len(events) != 1 || events[0].Type != store.EventClaimed {
		t.Fatalf("the tenant's events: %v %v, want the claim", events, err)
	}

	again, created, err := s.ClaimWarm(ctx, now, tenantSandbox("k"), "alpha", "alpha.k1", claimAs)
	if err != nil || created || again.ID != older.ID {
		t.Fatalf("repeated key: %s created %v %v, want %s back", again.ID, created, err, older.ID)
	}
	second := must[store.Sandbox](t)(first2(s.ClaimWarm(ctx, now, tenantSandbox(""), "alpha", "alpha.k1", claimAs)))
	if second.ID != newer.ID {
		t.Fatalf("second claim took %s, want %s", second.ID, newer.ID)
	}
	if _, _, err := s.ClaimWarm(ctx, now, tenantSandbox(""), "alpha", "alpha.k1", claimAs); !errors.Is(err, store.ErrNoWarm) {
		t.Fatalf("a drained shape: %v, want ErrNoWarm", err)
	}
}

// testWarmClaimConcurrent: claims racing for fewer warm sandboxes than they are take
// each at most once, and every claim either gets one of its own or ErrNoWarm.
func testWarmClaimConcurrent(t *testing.T, d Driver) {
	ctx := ctxFor(t)
	s := d.New(t)
	const warmN, claims = 5, 12
	warmIDs := map[string]bool{}
	for i := range warmN {
		warmIDs[warmRunning(t, s, "alpha.k", "alpha", t0.Add(time.Duration(i)*time.Second)).ID] = true
	}
	var mu sync.Mutex
	got := map[string]int{}
	misses := 0
	var wg sync.WaitGroup
	for range claims {
		wg.Go(func() {
			out, created, err := s.ClaimWarm(ctx, t0.Add(time.Hour), tenantSandbox(""), "alpha", "alpha.k", claimAs)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case errors.Is(err, store.ErrNoWarm):
				misses++
			case err != nil || !created:
				t.Errorf("claim: created %v, %v", created, err)
			default:
				got[out.ID]++
			}
		})
	}
	wg.Wait()
	if len(got) != warmN || misses != claims-warmN {
		t.Fatalf("%d sandboxes claimed, %d misses; want %d and %d", len(got), misses, warmN, claims-warmN)
	}
	for id, n := range got {
		if n != 1 || !warmIDs[id] {
			t.Fatalf("sandbox %s claimed %d times (warm: %v)", id, n, warmIDs[id])
		}
	}
	tenants, _, err := s.ListSandboxes(ctx, store.SandboxFilter{Org: "org1"})
	if err != nil {
		t.Fatal(err)
	}
	left, _, err := s.ListSandboxes(ctx, store.SandboxFilter{Org: store.WarmOrg})
	if err != nil {
		t.Fatal(err)
	}
	if len(tenants) != warmN || len(left) != 0 {
		t.Fatalf("%d tenant sandboxes and %d warm left, want %d and 0", len(tenants), len(left), warmN)
	}
}

// testWarmClaimQuota: the tenant's quota is checked as for any create, under its
// project's lock: a claim that the admission refuses writes nothing, and one it
// admits takes the warm sandbox.
func testWarmClaimQuota(t *testing.T, d Driver) {
	ctx := ctxFor(t)
	s := d.New(t)
	warm := warmRunning(t, s, "alpha.k", "alpha", t0)
	must[store.Project](t)(s.PutProject(ctx, t0, store.Project{Org: "org1", Name: "proj1", Quota: store.Quota{Sandboxes: 1}}))
	mustCreate(t, s, store.Sandbox{ID: ids.At("sbx", t0.Add(time.Hour)), Org: "org1", Project: "proj1", State: store.StateRunning})
	_, _, err := s.ClaimWarm(ctx, t0, tenantSandbox(""), "alpha", "alpha.k", func(a store.Admission, w store.Sandbox, ins *store.Sandbox) error {
		if err := store.CheckQuota("org1", "proj1", a.Quota, a.Usage, ins.Resources); err != nil {
			return err
		}
		return claimAs(a, w, ins)
	})
	wantCode(t, err, api.CodeQuotaExceeded)
	if got := must[store.Sandbox](t)(s.GetSandbox(ctx, warm.ID)); got.Org != store.WarmOrg {
		t.Fatalf("a refused claim took the warm sandbox: %s/%s", got.Org, got.Project)
	}

	// A project whose quota has room takes it, admitted with its usage.
	must[store.Project](t)(s.PutProject(ctx, t0, store.Project{Org: "org1", Name: "proj2", Quota: store.Quota{Sandboxes: 2}}))
	roomy := tenantSandbox("")
	roomy.Project = "proj2"
	var seen store.Admission
	out, created, err := s.ClaimWarm(ctx, t0, roomy, "alpha", "alpha.k", func(a store.Admission, w store.Sandbox, ins *store.Sandbox) error {
		seen = a
		if err := store.CheckQuota("org1", "proj2", a.Quota, a.Usage, ins.Resources); err != nil {
			return err
		}
		return claimAs(a, w, ins)
	})
	if err != nil || !created || out.ID != warm.ID || out.Project != "proj2" {
		t.Fatalf("a claim with room: %s of %s, created %v, %v; want %s", out.ID, out.Project, created, err, warm.ID)
	}
	if seen.Quota.Sandboxes != 2 {
		t.Fatalf("the claim was admitted with %+v, want proj2's quota", seen)
	}
}

// testWarmStats: each replica's counts add up per pool and shape, concurrent adds
// included, bucket by bucket even when the arrays differ in length; a pool's counts
// are listed by shape, go when the pool is deleted, and are not added to once it
// is gone.
func testWarmStats(t *testing.T, d Driver) {
	ctx := ctxFor(t)
	s := d.New(t)
	must[store.Pool](t)(s.CreatePool(ctx, t0, samplePool("alpha")))
	must[store.Pool](t)(s.CreatePool(ctx, t0, samplePool("beta")))
	if got := must[[]store.WarmStats](t)(s.ListWarmStats(ctx, "alpha")); len(got) != 0 {
		t.Fatalf("before any: %+v", got)
	}
	noErr(t, s.AddWarmStats(ctx, nil))
	noErr(t, s.AddWarmStats(ctx, []store.WarmStats{
		{Pool: "alpha", Shape: "k2", Misses: 1},
		{Pool: "alpha", Shape: "k1", Hits: 2, ClaimCounts: []int64{1, 1}, ClaimSeconds: 0.003},
		{Pool: "beta", Shape: "k1", Hits: 5, ClaimCounts: []int64{5}},
	}))
	const replicas, adds = 4, 5
	var wg sync.WaitGroup
	for r := range replicas {
		wg.Go(func() {
			for range adds {
				counts := make([]int64, len(store.WarmClaimBuckets)+1)
				counts[len(counts)-1] = int64(r)
				if err := s.AddWarmStats(ctx, []store.WarmStats{{Pool: "alpha", Shape: "k1", Hits: int64(r), Misses: 1,
					ClaimCounts: counts, ClaimSeconds: 2 * float64(r)}}); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	got := must[[]store.WarmStats](t)(s.ListWarmStats(ctx, "alpha"))
	wantCounts := make([]int64, len(store.WarmClaimBuckets)+1)
	wantCounts[0], wantCounts[1], wantCounts[len(wantCounts)-1] = 1, 1, (0+1+2+3)*adds
	want := []store.WarmStats{
		{Pool: "alpha", Shape: "k1", Hits: 2 + (0+1+2+3)*adds, Misses: replicas * adds, ClaimCounts: wantCounts,
			ClaimSeconds: 0.003 + 2*(0+1+2+3)*adds},
		{Pool: "alpha", Shape: "k2", Misses: 1, ClaimCounts: []int64{}},
	}
	if len(got) != len(want) {
		t.Fatalf("alpha's counts: %+v, want %+v", got, want)
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.Pool != w.Pool || g.Shape != w.Shape || g.Hits != w.Hits || g.Misses != w.Misses ||
			!slices.Equal(g.ClaimCounts, w.ClaimCounts) || math.Abs(g.ClaimSeconds-w.ClaimSeconds) > 1e-9 {
			t.Errorf("counts %d: %+v, want %+v", i, g, w)
		}
	}

	noErr(t, s.DeletePool(ctx, "alpha"))
	if got := must[[]store.WarmStats](t)(s.ListWarmStats(ctx, "alpha")); len(got) != 0 {
		t.Fatalf("after the pool's delete: %+v", got)
	}
	// A replica's counts that come after the delete are dropped, so that a pool
	// created again under the name starts from zero; so are a pool's never stored.
	noErr(t, s.AddWarmStats(ctx, []store.WarmStats{{Pool: "alpha", Shape: "k1", Hits: 1}, {Pool: "gamma", Shape: "k1", Misses: 1}}))
	must[store.Pool](t)(s.CreatePool(ctx, t0, samplePool("alpha")))
	for _, pool := range []string{"alpha", "gamma"} {
		if got := must[[]store.WarmStats](t)(s.ListWarmStats(ctx, pool)); len(got) != 0 {
			t.Fatalf("%s's counts added after the delete or without the pool: %+v", pool, got)
		}
	}
	if got := must[[]store.WarmStats](t)(s.ListWarmStats(ctx, "beta")); len(got) != 1 || got[0].Hits != 5 {
		t.Fatalf("another pool's counts after alpha's delete: %+v", got)
	}
}
