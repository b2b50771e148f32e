package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/internal/ids"
	"github.com/different-ai/differently/server/store"
)

// testSandboxUpdateBatch: each row gets fn with its own index; a refused or missing
// row is reported in errs and left alone while the others are written.
func testSandboxUpdateBatch(t *testing.T, d Driver) {
	ctx := ctxFor(t)
	s := d.New(t)
	var sbs []store.Sandbox
	for i := range 3 {
		sb := nthSandbox("proj1", i)
		sbs = append(sbs, mustCreate(t, s, sb))
	}
	refuse := errors.New("not this one")
	t1 := t0.Add(time.Minute)
	// Listed out of ID order on purpose: indexes follow the caller's list.
	list := []string{sbs[2].ID, "sbx_missing", sbs[0].ID, sbs[1].ID}
	out, errs, err := s.UpdateSandboxes(ctx, list, t1, func(i int, x *store.Sandbox) error {
		if x.ID == sbs[1].ID {
			x.Reason = "must not be written"
			return refuse
		}
		x.State = store.StateProvisioning
		x.Reason = fmt.Sprintf("index %d", i)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != len(list) || len(errs) != len(list) {
		t.Fatalf("UpdateSandboxes returned %d values and %d errors for %d IDs", len(out), len(errs), len(list))
	}
	wantCode(t, errs[1], api.CodeNotFound)
	if !errors.Is(errs[3], refuse) {
		t.Fatalf("errs[3] = %v, want fn's error", errs[3])
	}
	for _, i := range []int{0, 2} {
		if errs[i] != nil {
			t.Fatalf("errs[%d] = %v", i, errs[i])
		}
		got := out[i]
		if got.ID != list[i] || got.State != store.StateProvisioning || got.Reason != fmt.Sprintf("index %d", i) ||
			got.Version != 2 || got.StateChangedAt != ts(t1) {
			t.Fatalf("out[%d] = %s", i, show(got))
		}
		equal(t, "stored", must[store.Sandbox](t)(s.GetSandbox(ctx, list[i])), got)
	}
	equal(t, "refused row", must[store.Sandbox](t)(s.GetSandbox(ctx, sbs[1].ID)), sbs[1])

	if _, _, err := s.UpdateSandboxes(ctx, []string{sbs[0].ID, sbs[0].ID}, t1, func(int, *store.Sandbox) error { return nil }); err == nil {
		t.Fatal("UpdateSandboxes accepted the same ID twice")
	}
	if out, errs, err := s.UpdateSandboxes(ctx, nil, t1, func(int, *store.Sandbox) error { return nil }); err != nil || len(out)+len(errs) != 0 {
		t.Fatalf("empty batch: %v, %v, %v", out, errs, err)
	}
}

// testSandboxUpdateBatchConcurrent: overlapping batches from two connections, in
// opposite orders, lose no increment and do not deadlock.
func testSandboxUpdateBatchConcurrent(t *testing.T, d Driver) {
	ctx := ctxFor(t)
	s := d.New(t)
	other := d.Reopen(t, s)
	var list []string
	for i := range 5 {
		sb := nthSandbox("proj1", i)
		list = append(list, mustCreate(t, s, sb).ID)
	}
	reversed := make([]string, len(list))
	for i, id := range list {
		reversed[len(list)-1-i] = id
	}
	const n = 10
	alternating(t, n, s, other, func(i int, st store.Store) ([]store.Sandbox, []error, error) {
		l := list
		if i%2 == 1 {
			l = reversed
		}
		return st.UpdateSandboxes(ctx, l, t0.Add(time.Second), incrementAttempts)
	})
	for _, id := range list {
		if got := must[store.Sandbox](t)(s.GetSandbox(ctx, id)); got.Attempts != n {
			t.Fatalf("sandbox %s: attempts %d after %d concurrent batches", id, got.Attempts, n)
		}
	}
}

// testKnownUpdate: UpdateKnownSandboxes gives what UpdateSandboxes would, whether
// the row it is given is still the stored one or not: fn's last run decides, and
// what it refused, what is missing, and a claim taken since (which leaves the
// version) are never written over. Its events are appended once each.
func testKnownUpdate(t *testing.T, d Driver) {
	ctx := ctxFor(t)
	s := d.New(t)
	var sbs []store.Sandbox
	for i := range 4 {
		sb := nthSandbox("proj1", i)
		sb.State = store.StateQueued
		if i != 2 {
			sb.NextAttemptAt = t0.Add(time.Hour) // not due: only sbs[2] is claimed below
		}
		sbs = append(sbs, mustCreate(t, s, sb))
	}
	t1, t2 := t0.Add(time.Minute), t0.Add(2*time.Minute)
	// sbs[1] changes after it was read, sbs[2] is claimed (its version stays).
	changed := must[store.Sandbox](t)(s.UpdateSandbox(ctx, sbs[1].ID, t1, func(x *store.Sandbox) error { x.Reason = "changed"; return nil }))
	claimed, err := s.ClaimSandboxes(ctx, t1, "replica-b", time.Hour, 10)
	if err != nil {
		t.Fatal(err)
	}
	var claimedRow store.Sandbox
	for _, c := range claimed {
		if c.ID == sbs[2].ID {
			claimedRow = c
		}
	}
	if len(claimed) != 1 || claimedRow.ClaimedBy != "replica-b" || claimedRow.Version != sbs[2].Version {
		t.Fatalf("the claim left %s", show(claimedRow))
	}
	refuse := errors.New("not this one")
	known := []store.Sandbox{sbs[3], sbs[1], sbs[2], sbs[0], {ID: "sbx_missing", Version: 1}}
	runs := make([]int, len(known))
	out, errs, err := s.UpdateKnownSandboxes(ctx, known, t2, func(i int, x *store.Sandbox) error {
		runs[i]++
		if x.ID == sbs[3].ID {
			x.Reason = "must not be written"
			return refuse
		}
		x.State, x.Pool = store.StateProvisioning, "alpha"
		x.Reason = fmt.Sprintf("index %d saw %q claimed by %q", i, x.Reason, x.ClaimedBy)
		x.Pending = append(x.Pending, store.Event{Type: store.EventPlaced, From: store.StateQueued, To: store.StateProvisioning, Pool: "alpha"})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(errs[0], refuse) {
		t.Fatalf("errs[0] = %v, want fn's error", errs[0])
	}
	wantCode(t, errs[4], api.CodeNotFound)
	want := map[int]struct {
		from     store.Sandbox
		reason   string
		claimant string
	}{
		1: {changed, "changed", ""},
		2: {claimedRow, "", "replica-b"},
		3: {sbs[0], "", ""},
	}
	for i, w := range want {
		if errs[i] != nil {
			t.Fatalf("errs[%d] = %v", i, errs[i])
		}
		got := out[i]
		if got.State != store.StateProvisioning || got.Reason != fmt.Sprintf("index %d saw %q claimed by %q", i, w.reason, w.claimant) ||
			got.ClaimedBy != w.claimant || got.Version != w.from.Version+1 || got.UpdatedAt != ts(t2) {
			t.Fatalf("out[%d] = %s, want it written from %s", i, show(got), show(w.from))
		}
		equal(t, "stored", must[store.Sandbox](t)(s.GetSandbox(ctx, known[i].ID)), got)
		settle(t, d, s)
		events, _, err := s.ListEvents(ctx, store.EventFilter{SandboxID: known[i].ID, Types: []store.EventType{store.EventPlaced}})
		if err != nil {
			t.Fatal(err)
		}
		if len(events) != 1 {
			t.Fatalf("sandbox %s: %d placed events, want 1", known[i].ID, len(events))
		}
	}
	if runs[3] < 1 || runs[1] < 1 || runs[2] < 1 {
		t.Fatalf("fn ran %v times by index", runs)
	}
	equal(t, "refused row", must[store.Sandbox](t)(s.GetSandbox(ctx, sbs[3].ID)), sbs[3])

	// The rows it returned are known in their turn.
	again, errs, err := s.UpdateKnownSandboxes(ctx, []store.Sandbox{out[3]}, t2, func(_ int, x *store.Sandbox) error { x.Attempts = 7; return nil })
	if err != nil || errs[0] != nil {
		t.Fatal(err, errs)
	}
	equal(t, "written again", must[store.Sandbox](t)(s.GetSandbox(ctx, sbs[0].ID)), again[0])
	if _, _, err := s.UpdateKnownSandboxes(ctx, []store.Sandbox{sbs[0], sbs[0]}, t1, func(int, *store.Sandbox) error { return nil }); err == nil {
		t.Fatal("UpdateKnownSandboxes accepted the same ID twice")
	}
}

// testKnownUpdateConcurrent: writers that all hold the same row, soon stale, each
// increment it once: none of the increments is lost, on one connection or two.
func testKnownUpdateConcurrent(t *testing.T, d Driver) {
	ctx := ctxFor(t)
	s := d.New(t)
	other := d.Reopen(t, s)
	first := mustCreate(t, s, newSandbox("proj1"))
	const n = 10
	alternating(t, n, s, other, func(_ int, st store.Store) ([]store.Sandbox, []error, error) {
		return st.UpdateKnownSandboxes(ctx, []store.Sandbox{first}, t0.Add(time.Second), incrementAttempts)
	})
	if got := must[store.Sandbox](t)(s.GetSandbox(ctx, first.ID)); got.Attempts != n || got.Version != first.Version+n {
		t.Fatalf("after %d concurrent writes of the same known row: %s", n, show(got))
	}
}

func incrementAttempts(_ int, x *store.Sandbox) error {
	x.Attempts++
	return nil
}

// alternating makes n batch writes at once, the even ones on s and the odd ones on
// other, and fails the test with any error they return.
func alternating(t *testing.T, n int, s, other store.Store, write func(i int, st store.Store) ([]store.Sandbox, []error, error)) {
	t.Helper()
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			st := s
			if i%2 == 1 {
				st = other
			}
			_, errs, err := write(i, st)
			if err == nil {
				err = errors.Join(errs...)
			}
			if err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
}

// testWatch: a listener hears a resync first, then every create and state change,
// the deletion of a token and a policy write made through the store; a write that
// keeps the state is not reported. (Drivers shared by replicas test the feed across
// stores themselves.)
func testWatch(t *testing.T, d Driver) {
	ctx := ctxFor(t)
	s := d.New(t)
	changes := make(chan store.Change, 64)
	wctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- s.Watch(wctx, func(c store.Change) {
			changes <- c
		})
	}()
	t.Cleanup(func() {
		stop()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("Watch returned %v after its context ended, want context.Canceled", err)
		}
	})
	next := func() store.Change {
		t.Helper()
		select {
		case c := <-changes:
			return c
		case <-ctx.Done():
			t.Fatal("no change reported before the test's deadline")
		}
		return store.Change{}
	}
	if c := next(); c.Kind != store.ChangeResync || c.Err != nil {
		t.Fatalf("first change %+v, want a resync without error", c)
	}

	sb := mustCreate(t, s, newSandbox("proj1"))
	if c := next(); c != (store.Change{Kind: store.ChangeSandbox, ID: sb.ID, State: store.StateQueued}) {
		t.Fatalf("after create: %+v", c)
	}
	// Not a state change: nothing to report. The state change that follows must be
	// the next change heard.
	must[store.Sandbox](t)(s.UpdateSandbox(ctx, sb.ID, t0, func(x *store.Sandbox) error { x.Reason = "x"; return nil }))
	must[store.Sandbox](t)(s.UpdateSandbox(ctx, sb.ID, t0, func(x *store.Sandbox) error { x.State = store.StateProvisioning; return nil }))
	if c := next(); c != (store.Change{Kind: store.ChangeSandbox, ID: sb.ID, State: store.StateProvisioning}) {
		t.Fatalf("after a state change: %+v", c)
	}
	if _, _, err := s.UpdateSandboxes(ctx, []string{sb.ID}, t0, func(_ int, x *store.Sandbox) error { x.State = store.StateRunning; return nil }); err != nil {
		t.Fatal(err)
	}
	if c := next(); c != (store.Change{Kind: store.ChangeSandbox, ID: sb.ID, State: store.StateRunning}) {
		t.Fatalf("after a batch update: %+v", c)
	}
	// A write that leaves the sandbox claimed says so (a deletion under way).
	must[store.Sandbox](t)(s.UpdateSandbox(ctx, sb.ID, t0, func(x *store.Sandbox) error {
		x.State, x.ClaimedBy, x.ClaimExpiresAt = store.StateTerminating, "replica-1", ptr(t0.Add(time.Minute))
		return nil
	}))
	if c := next(); c != (store.Change{Kind: store.ChangeSandbox, ID: sb.ID, State: store.StateTerminating, Claimed: true}) {
		t.Fatalf("after a claimed state change: %+v", c)
	}

	tok := must[store.Token](t)(s.CreateToken(ctx, t0, store.Token{ID: ids.New("tok"), Name: "w", Hash: []byte("0123456789abcdef0123456789abcdef"), Scope: store.ScopeAdmin}))
	if err := s.DeleteToken(ctx, tok.ID); err != nil {
		t.Fatal(err)
	}
	if c := next(); c != (store.Change{Kind: store.ChangeToken, ID: tok.ID}) {
		t.Fatalf("after deleting a token: %+v", c)
	}
	// Deleting a project revokes its tokens, which every replica's cache must hear of.
	must[store.Project](t)(s.PutProject(ctx, t0, store.Project{Org: "acme", Name: "gone"}))
	ptok := must[store.Token](t)(s.CreateToken(ctx, t0, store.Token{ID: ids.New("tok"), Hash: []byte("fedcba9876543210fedcba9876543210"),
		Scope: store.ScopeProject, Org: "acme", Project: "gone"}))
	noErr(t, s.DeleteProject(ctx, "acme", "gone"))
	if c := next(); c != (store.Change{Kind: store.ChangeToken, ID: ptok.ID}) {
		t.Fatalf("after deleting a project with a token: %+v", c)
	}
	if err := s.PutPolicy(ctx, store.Policy{}); err != nil {
		t.Fatal(err)
	}
	if c := next(); c.Kind != store.ChangePolicy {
		t.Fatalf("after writing the policy: %+v", c)
	}
}
