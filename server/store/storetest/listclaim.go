package storetest

import (
	"errors"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/server/store"
)

func list(t *testing.T, s store.Store, f store.SandboxFilter) ([]store.Sandbox, string) {
	t.Helper()
	items, next, err := s.ListSandboxes(ctxFor(t), f)
	noErr(t, err)
	return items, next
}

func idsOf(sbs []store.Sandbox) []string {
	out := []string{}
	for _, sb := range sbs {
		out = append(out, sb.ID)
	}
	return out
}

func testSandboxListFilters(t *testing.T, d Driver) {
	ctx := ctxFor(t)
	s := d.New(t)
	mk := func(project, pool string, state store.State, labels map[string]string) string {
		sb := newSandbox(project)
		sb.Pool, sb.State, sb.Labels = pool, state, labels
		if project == "proj3" {
			sb.Org = "org2"
		}
		return mustCreate(t, s, sb).ID
	}
	a := mk("proj1", "alpha", store.StateRunning, map[string]string{"team": "infra", "differently.dev/sandbox-id": "x"})
	b := mk("proj1", "beta", store.StateQueued, map[string]string{"team": "infra", "tier": "gold"})
	c := mk("proj1", "alpha", store.StateTerminated, map[string]string{"team": "web"})
	e := mk("proj2", "alpha", store.StateRunning, nil)
	f := mk("proj3", "", store.StateQueued, map[string]string{"a.b/c d": `q"uote`})

	for _, tc := range []struct {
		name   string
		filter store.SandboxFilter
		want   []string
	}{
		{"all", store.SandboxFilter{}, []string{a, b, c, e, f}},
		{"project", store.SandboxFilter{Project: "proj1"}, []string{a, b, c}},
		{"org", store.SandboxFilter{Org: "org2"}, []string{f}},
		{"pool", store.SandboxFilter{Pool: "alpha"}, []string{a, c, e}},
		{"states", store.SandboxFilter{States: []store.State{store.StateRunning, store.StateQueued}}, []string{a, b, e, f}},
		{"label", store.SandboxFilter{Labels: map[string]string{"team": "infra"}}, []string{a, b}},
		{"two labels", store.SandboxFilter{Labels: map[string]string{"team": "infra", "tier": "gold"}}, []string{b}},
		{"reserved label", store.SandboxFilter{Labels: map[string]string{"differently.dev/sandbox-id": "x"}}, []string{a}},
		{"odd label", store.SandboxFilter{Labels: map[string]string{"a.b/c d": `q"uote`}}, []string{f}},
		{"label value mismatch", store.SandboxFilter{Labels: map[string]string{"team": "inf"}}, []string{}},
		{"empty label value", store.SandboxFilter{Labels: map[string]string{"team": ""}}, []string{}},
		{"combined", store.SandboxFilter{Project: "proj1", Pool: "alpha", States: []store.State{store.StateRunning},
			Labels: map[string]string{"team": "infra"}}, []string{a}},
	} {
		items, next := list(t, s, tc.filter)
		if next != "" {
			t.Errorf("%s: unexpected next cursor %q", tc.name, next)
		}
		slices.Sort(tc.want) // listings are in ID order
		if got := idsOf(items); !slices.Equal(got, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
		// EachSandbox walks the same selection, whatever Limit and Cursor say.
		each := tc.filter
		each.Limit, each.Cursor = 1, "ignored"
		var walked []store.Sandbox
		noErr(t, s.EachSandbox(ctx, each, func(sb store.Sandbox) error {
			walked = append(walked, sb)
			return nil
		}))
		if got := idsOf(walked); !slices.Equal(got, tc.want) {
			t.Errorf("%s: EachSandbox walked %v, want %v", tc.name, got, tc.want)
		}
		if len(walked) > 0 && !reflect.DeepEqual(walked, items) {
			t.Errorf("%s: EachSandbox's sandboxes differ from ListSandboxes'", tc.name)
		}
	}
	// fn's error ends the walk at once and comes back as is.
	stop := errors.New("stop")
	calls := 0
	if err := s.EachSandbox(ctx, store.SandboxFilter{}, func(store.Sandbox) error {
		calls++
		return stop
	}); !errors.Is(err, stop) || calls != 1 {
		t.Errorf("EachSandbox after fn failed: err %v, %d calls", err, calls)
	}

	_, _, err := s.ListSandboxes(ctx, store.SandboxFilter{Cursor: "not a cursor!"})
	wantCode(t, err, api.CodeInvalidRequest)
	_, _, err = s.ListSandboxes(ctx, store.SandboxFilter{Limit: -1})
	wantCode(t, err, api.CodeInvalidRequest)
}

func testSandboxListPaging(t *testing.T, d Driver) {
	s := d.New(t)
	var want []string
	for range 25 {
		want = append(want, mustCreate(t, s, newSandbox("proj1")).ID)
	}
	mustCreate(t, s, newSandbox("other"))
	var got []string
	var sizes []int
	f := store.SandboxFilter{Project: "proj1", Limit: 10}
	for {
		items, next := list(t, s, f)
		sizes = append(sizes, len(items))
		got = append(got, idsOf(items)...)
		if next == "" {
			break
		}
		if len(sizes) > 5 {
			t.Fatal("paging does not end")
		}
		f.Cursor = next
	}
	equal(t, "page sizes", sizes, []int{10, 10, 5})
	slices.Sort(want)
	equal(t, "paged ids", got, want) // in ID order, each once

	// Exactly one page when the limit is the total: no empty trailing page.
	items, next := list(t, s, store.SandboxFilter{Project: "proj1", Limit: 25})
	if len(items) != 25 || next != "" {
		t.Fatalf("limit 25 of 25: %d items, next %q", len(items), next)
	}
	// The default limit applies when none is given.
	items, _ = list(t, s, store.SandboxFilter{})
	if len(items) != 26 {
		t.Fatalf("default limit: %d items", len(items))
	}
}

func testSandboxClaim(t *testing.T, d Driver) {
	ctx := ctxFor(t)
	s := d.New(t)
	mk := func(state store.State, next time.Time, claimExp *time.Time) string {
		sb := newSandbox("proj1")
		sb.State, sb.NextAttemptAt, sb.ClaimExpiresAt = state, next, claimExp
		if claimExp != nil {
			sb.ClaimedBy = "old"
		}
		return mustCreate(t, s, sb).ID
	}
	now := t0.Add(time.Minute)
	late := mk(store.StateQueued, t0.Add(30*time.Second), nil)
	early := mk(store.StateQueued, t0.Add(10*time.Second), nil)
	expired := mk(store.StateQueued, t0, ptr(now))        // claim expiring exactly now is free
	mk(store.StateQueued, t0, ptr(now.Add(time.Second)))  // live claim
	mk(store.StateQueued, now.Add(time.Millisecond), nil) // not due
	mk(store.StateProvisioning, t0, nil)                  // not queued
	exact := mk(store.StateQueued, now, nil)              // due exactly now

	got := must[[]store.Sandbox](t)(s.ClaimSandboxes(ctx, now, "me", 30*time.Second, 2))
	equal(t, "first claim", idsOf(got), []string{expired, early}) // by NextAttemptAt
	for _, sb := range got {
		if sb.ClaimedBy != "me" || sb.ClaimExpiresAt == nil || *sb.ClaimExpiresAt != ts(now.Add(30*time.Second)) {
			t.Fatalf("claim fields not set: %s", show(sb))
		}
		if sb.Version != 1 || sb.UpdatedAt != ts(t0) {
			t.Fatalf("a claim changed Version/UpdatedAt: %s", show(sb))
		}
		equal(t, "stored claim", must[store.Sandbox](t)(s.GetSandbox(ctx, sb.ID)), sb)
	}
	got = must[[]store.Sandbox](t)(s.ClaimSandboxes(ctx, now, "me", 30*time.Second, 10))
	equal(t, "second claim", idsOf(got), []string{late, exact}) // by NextAttemptAt
	got = must[[]store.Sandbox](t)(s.ClaimSandboxes(ctx, now, "me", 30*time.Second, 10))
	equal(t, "nothing left", idsOf(got), []string{})

	// When the leases run out, another claimer may take those sandboxes (and the
	// one that was not due yet, which now is).
	later := now.Add(30 * time.Second)
	got = must[[]store.Sandbox](t)(s.ClaimSandboxes(ctx, later, "you", time.Minute, 10))
	if len(got) != 6 || got[0].ClaimedBy != "you" {
		t.Fatalf("after lease expiry: %v", idsOf(got))
	}
	// Releasing through UpdateSandbox makes it claimable again at once.
	must[store.Sandbox](t)(s.UpdateSandbox(ctx, late, later, func(x *store.Sandbox) error {
		x.ClaimedBy, x.ClaimExpiresAt = "", nil
		return nil
	}))
	got = must[[]store.Sandbox](t)(s.ClaimSandboxes(ctx, later, "me", time.Minute, 10))
	equal(t, "after release", idsOf(got), []string{late})
	if got := must[[]store.Sandbox](t)(s.ClaimSandboxes(ctx, later, "me", time.Minute, 0)); len(got) != 0 {
		t.Fatal("limit 0 claimed something")
	}
}

func testSandboxClaimConcurrent(t *testing.T, d Driver) {
	ctx := ctxFor(t)
	s := d.New(t)
	other := d.Reopen(t, s)
	const total = 40
	want := map[string]bool{}
	for range total {
		want[mustCreate(t, s, newSandbox("proj1")).ID] = true
	}
	var mu sync.Mutex
	claimed := map[string]string{}
	var wg sync.WaitGroup
	for w := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st := s
			if w%2 == 1 {
				st = other
			}
			claimer := string(rune('a' + w))
			for {
				got, err := st.ClaimSandboxes(ctx, t0, claimer, time.Minute, 3)
				if err != nil {
					t.Error(err)
					return
				}
				if len(got) == 0 {
					return
				}
				mu.Lock()
				for _, sb := range got {
					if prev, dup := claimed[sb.ID]; dup {
						t.Errorf("%s claimed by %s and %s", sb.ID, prev, claimer)
					}
					claimed[sb.ID] = claimer
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(claimed) != total {
		t.Fatalf("claimed %d of %d sandboxes", len(claimed), total)
	}
	for id := range want {
		if _, ok := claimed[id]; !ok {
			t.Fatalf("%s never claimed", id)
		}
	}
}

func testSandboxCount(t *testing.T, d Driver) {
	ctx := ctxFor(t)
	s := d.New(t)
	for _, x := range []struct {
		pool  string
		state store.State
	}{{"alpha", store.StateRunning}, {"alpha", store.StateProvisioning}, {"alpha", store.StateTerminated},
		{"beta", store.StateRunning}, {"", store.StateQueued}} {
		sb := newSandbox("proj1")
		sb.Pool, sb.State = x.pool, x.state
		mustCreate(t, s, sb)
	}
	got := must[map[string]int](t)(s.CountSandboxesByPool(ctx, []store.State{store.StateRunning, store.StateProvisioning}))
	equal(t, "running+provisioning", got, map[string]int{"alpha": 2, "beta": 1})
	got = must[map[string]int](t)(s.CountSandboxesByPool(ctx, store.NonTerminalStates))
	equal(t, "non-terminal", got, map[string]int{"alpha": 2, "beta": 1, "": 1})
	got = must[map[string]int](t)(s.CountSandboxesByPool(ctx, nil))
	equal(t, "no states", got, map[string]int{})
	byState := must[map[store.State]int](t)(s.CountSandboxesByState(ctx, store.NonTerminalStates))
	equal(t, "by state", byState, map[store.State]int{store.StateRunning: 2, store.StateProvisioning: 1, store.StateQueued: 1})
	byState = must[map[store.State]int](t)(s.CountSandboxesByState(ctx, nil))
	equal(t, "by state, no states", byState, map[store.State]int{})
}

// testSandboxListExpiresBy: the expiry filter keeps sandboxes expiring at or before
// the time given, and never one without an expiry.
func testSandboxListExpiresBy(t *testing.T, d Driver) {
	ctx := ctxFor(t)
	s := d.New(t)
	at := func(d time.Duration) *time.Time { x := t0.Add(d); return &x }
	var want []string
	for i, exp := range []*time.Time{at(-time.Minute), at(0), at(time.Minute), nil} {
		sb := nthSandbox("proj1", i)
		sb.State, sb.ExpiresAt = store.StateRunning, exp
		mustCreate(t, s, sb)
		if i < 2 {
			want = append(want, sb.ID)
		}
	}
	now := t0
	page, _, err := s.ListSandboxes(ctx, store.SandboxFilter{States: []store.State{store.StateRunning}, ExpiresBy: &now})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, sb := range page {
		got = append(got, sb.ID)
	}
	equal(t, "expired by t0", got, want)
}
