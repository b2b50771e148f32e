package storetest

import (
	"encoding/base64"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/internal/ids"
	"github.com/different-ai/differently/server/store"
)

// settle waits until ListEvents can show every event appended so far (Driver.Settle).
func settle(t *testing.T, d Driver, s store.Store) {
	t.Helper()
	if d.Settle != nil {
		d.Settle(t, s)
	}
}

// event is a pending event as server/lifecycle records one.
func event(typ store.EventType, from, to store.State) store.Event {
	return store.Event{Type: typ, From: from, To: to, Actor: "test"}
}

func listEvents(t *testing.T, s store.Store, f store.EventFilter) ([]store.Event, string) {
	t.Helper()
	items, next, err := s.ListEvents(ctxFor(t), f)
	noErr(t, err)
	if next == "" {
		t.Fatalf("ListEvents(%+v) returned no cursor", f)
	}
	return items, next
}

// sandboxEvents lists every event of one sandbox.
func sandboxEvents(t *testing.T, s store.Store, id string) []store.Event {
	t.Helper()
	items, _ := listEvents(t, s, store.EventFilter{SandboxID: id, Limit: store.MaxLimit})
	return items
}

// follow reads f page by page until a page comes back short and returns what it
// read and the last cursor.
func follow(t *testing.T, s store.Store, f store.EventFilter) ([]store.Event, string) {
	t.Helper()
	var all []store.Event
	for {
		items, next := listEvents(t, s, f)
		all = append(all, items...)
		f.After = next
		if len(items) < f.Limit || f.Limit == 0 {
			return all, next
		}
	}
}

func seqsOf(es []store.Event) []int64 {
	out := []int64{}
	for _, e := range es {
		out = append(out, e.Seq)
	}
	return out
}

// wantIncreasing fails unless the events' Seq strictly increase.
func wantIncreasing(t *testing.T, what string, es []store.Event) {
	t.Helper()
	for i := 1; i < len(es); i++ {
		if es[i].Seq <= es[i-1].Seq {
			t.Fatalf("%s: seqs %v do not increase", what, seqsOf(es))
		}
	}
}

// wantEvents compares events with what was appended, Seq aside (checked increasing).
func wantEvents(t *testing.T, what string, got, want []store.Event) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d events, want %d:\n got  %+v\n want %+v", what, len(got), len(want), got, want)
	}
	wantIncreasing(t, what, got)
	for i := range want {
		if got[i].Seq <= 0 {
			t.Fatalf("%s: event %d has seq %d", what, i, got[i].Seq)
		}
		if got[i].Cursor == "" {
			t.Fatalf("%s: event %d has no cursor", what, i)
		}
		w := want[i]
		w.Seq, w.Cursor = got[i].Seq, got[i].Cursor
		equal(t, what, got[i], w)
	}
}

// stamped is e as the store appends it to sb at now.
func stamped(e store.Event, sb store.Sandbox, now time.Time) store.Event {
	e.SandboxID, e.Org, e.Project, e.At = sb.ID, sb.Org, sb.Project, ts(now)
	return e
}

// testEventsAppended: creates, updates and batch updates append their pending events
// with the sandbox's fields and the write's time, in order; the pending list is
// neither stored nor returned.
func testEventsAppended(t *testing.T, d Driver) {
	ctx := ctxFor(t)
	s := d.New(t)
	sb := newSandbox("proj1")
	sb.State, sb.Pool = store.StateProvisioning, "alpha"
	created := event(store.EventCreated, "", store.StateQueued)
	created.Message = "from a backend: \x00 \xff"
	placed := event(store.EventPlaced, store.StateQueued, store.StateProvisioning)
	placed.Pool, placed.Attempt = "alpha", 1
	placed.Candidates = []store.Candidate{{Pool: "alpha", Rank: 1}, {Pool: "beta", Reason: "full"}}
	sb.Pending = []store.Event{created, placed}
	out := mustCreate(t, s, sb)
	if out.Pending != nil {
		t.Fatalf("CreateSandbox returned pending events %+v", out.Pending)
	}
	if got := must[store.Sandbox](t)(s.GetSandbox(ctx, sb.ID)); got.Pending != nil {
		t.Fatalf("GetSandbox returned pending events %+v", got.Pending)
	}
	// Text from a backend is stored as a reason is.
	created.Message = "from a backend: \uFFFD \uFFFD"
	want := []store.Event{stamped(created, sb, t0), stamped(placed, sb, t0)}
	wantEvents(t, "after create", sandboxEvents(t, s, sb.ID), want)

	t1 := t0.Add(time.Minute)
	running := event(store.EventRunning, store.StateProvisioning, store.StateRunning)
	running.Pool, running.Attempt, running.DurationMs = "alpha", 1, 1234
	out = must[store.Sandbox](t)(s.UpdateSandbox(ctx, sb.ID, t1, func(x *store.Sandbox) error {
		if x.Pending != nil {
			t.Errorf("UpdateSandbox's callback got pending events %+v", x.Pending)
		}
		x.State = store.StateRunning
		x.Pending = append(x.Pending, running)
		return nil
	}))
	if out.Pending != nil {
		t.Fatalf("UpdateSandbox returned pending events %+v", out.Pending)
	}
	want = append(want, stamped(running, sb, t1))
	wantEvents(t, "after update", sandboxEvents(t, s, sb.ID), want)

	// A batch appends the events of the rows it writes, and only theirs.
	other := mustCreate(t, s, store.Sandbox{ID: ids.At("sbx", t0.Add(time.Millisecond)), Org: "org2", Project: "proj2"})
	refused := mustCreate(t, s, store.Sandbox{ID: ids.At("sbx", t0.Add(2*time.Millisecond)), Org: "org1", Project: "proj1"})
	t2 := t1.Add(time.Minute)
	requeued := event(store.EventRequeued, store.StateProvisioning, store.StateQueued)
	requeued.Pool, requeued.Attempt, requeued.Code, requeued.Message = "beta", 2, "backend_error", "boom"
	stopped := event(store.EventStopped, store.StateRunning, store.StateStopped)
	list := []string{refused.ID, other.ID, "sbx_missing", sb.ID}
	outs, errs, err := s.UpdateSandboxes(ctx, list, t2, func(i int, x *store.Sandbox) error {
		switch x.ID {
		case refused.ID:
			x.Pending = append(x.Pending, stopped)
			return errors.New("refused")
		case other.ID:
			x.Pending = append(x.Pending, requeued, event(store.EventWaiting, store.StateQueued, store.StateQueued))
		case sb.ID:
			x.State = store.StateStopped
			x.Pending = append(x.Pending, stopped)
		}
		return nil
	})
	noErr(t, err)
	if errs[0] == nil || errs[1] != nil || errs[2] == nil || errs[3] != nil {
		t.Fatalf("UpdateSandboxes errors %v", errs)
	}
	for i, o := range outs {
		if o.Pending != nil {
			t.Fatalf("UpdateSandboxes returned pending events %+v for %s", o.Pending, list[i])
		}
	}
	want = append(want, stamped(stopped, sb, t2))
	all := sandboxEvents(t, s, sb.ID)
	wantEvents(t, "after a batch", all, want)
	otherEvents := sandboxEvents(t, s, other.ID)
	wantEvents(t, "the batch's other row", otherEvents, []store.Event{stamped(requeued, other, t2),
		stamped(event(store.EventWaiting, store.StateQueued, store.StateQueued), other, t2)})
	wantEvents(t, "the refused row", sandboxEvents(t, s, refused.ID), nil)
	// Seq increases across sandboxes too: the batch came after the update.
	if otherEvents[0].Seq <= all[2].Seq {
		t.Fatalf("the batch's events have seqs %v, not after the update's %d", seqsOf(otherEvents), all[2].Seq)
	}
}

// testEventsNotAppended: nothing is appended for a write that does not happen: a
// callback's error, an idempotent replay, a refused admission. An admission made
// twice (a driver may) appends its events once.
func testEventsNotAppended(t *testing.T, d Driver) {
	ctx := ctxFor(t)
	s := d.New(t)
	sb := mustCreate(t, s, newSandbox("proj1"))
	refuse := errors.New("no")
	_, err := s.UpdateSandbox(ctx, sb.ID, t0, func(x *store.Sandbox) error {
		x.State = store.StateProvisioning
		x.Pending = append(x.Pending, event(store.EventPlaced, store.StateQueued, store.StateProvisioning))
		return refuse
	})
	if !errors.Is(err, refuse) {
		t.Fatalf("UpdateSandbox = %v, want the callback's error", err)
	}
	wantEvents(t, "after a refused update", sandboxEvents(t, s, sb.ID), nil)

	created := event(store.EventCreated, "", store.StateQueued)
	keyed := newSandbox("proj1")
	keyed.IdempotencyKey = "k"
	keyed.Pending = []store.Event{created}
	first := mustCreate(t, s, keyed)
	replay := newSandbox("proj1")
	replay.IdempotencyKey = "k"
	replay.Pending = []store.Event{created}
	again, ok, err := s.CreateSandbox(ctx, t0.Add(time.Second), replay)
	noErr(t, err)
	if ok || again.ID != first.ID || again.Pending != nil {
		t.Fatalf("replay = %s, created %v", show(again), ok)
	}
	again, ok, err = s.CreateSandboxAdmitted(ctx, t0.Add(time.Second), replay, func(store.Admission, *store.Sandbox) error { return nil })
	noErr(t, err)
	if ok || again.ID != first.ID || again.Pending != nil {
		t.Fatalf("admitted replay = %s, created %v", show(again), ok)
	}
	wantEvents(t, "after replays", sandboxEvents(t, s, first.ID), []store.Event{stamped(created, keyed, t0)})

	// A refused admission stores nothing, even what admit recorded.
	no := newSandbox("proj1")
	no.Pending = []store.Event{created}
	_, _, err = s.CreateSandboxAdmitted(ctx, t0, no, func(_ store.Admission, x *store.Sandbox) error {
		x.Pending = append(x.Pending, event(store.EventWaiting, store.StateQueued, store.StateQueued))
		return refuse
	})
	if !errors.Is(err, refuse) {
		t.Fatalf("refused admission = %v", err)
	}
	wantEvents(t, "after a refused admission", sandboxEvents(t, s, no.ID), nil)

	// Admitted with a queue (sb above is queued) and with a quota: what admit
	// records is appended, once however often the driver admits.
	must[store.Project](t)(s.PutProject(ctx, t0, store.Project{Org: "org1", Name: "quota", Quota: store.Quota{Sandboxes: 5}}))
	for _, project := range []string{"proj1", "quota"} {
		yes := newSandbox(project)
		yes.Pending = make([]store.Event, 1, 8) // room to append in place
		yes.Pending[0] = created
		waiting := event(store.EventWaiting, store.StateQueued, store.StateQueued)
		out, ok, err := s.CreateSandboxAdmitted(ctx, t0, yes, func(a store.Admission, x *store.Sandbox) error {
			x.Pending = append(x.Pending, waiting)
			return store.CheckQuota(yes.Org, yes.Project, a.Quota, a.Usage, yes.Resources)
		})
		noErr(t, err)
		if !ok || out.Pending != nil {
			t.Fatalf("admitted create in %s = %s, created %v", project, show(out), ok)
		}
		wantEvents(t, "admitted in "+project, sandboxEvents(t, s, yes.ID),
			[]store.Event{stamped(created, yes, t0), stamped(waiting, yes, t0)})
	}
}

// testEventsList: every filter, pages, cursors that continue with newer events only,
// also from an empty last page, and the errors.
func testEventsList(t *testing.T, d Driver) {
	ctx := ctxFor(t)
	s := d.New(t)
	mk := func(org, project string, at time.Duration, events ...store.Event) store.Sandbox {
		sb := store.Sandbox{ID: ids.At("sbx", t0.Add(at)), Org: org, Project: project, Pending: events}
		return mustCreate(t, s, sb)
	}
	placedOn := func(pool string) store.Event {
		e := event(store.EventPlaced, store.StateQueued, store.StateProvisioning)
		e.Pool = pool
		return e
	}
	created := event(store.EventCreated, "", store.StateQueued)
	a := mk("org1", "proj1", 0, created, placedOn("alpha"))
	b := mk("org1", "proj2", time.Millisecond, created, placedOn("beta"))
	c := mk("org2", "proj3", 2*time.Millisecond, created)
	running := event(store.EventRunning, store.StateProvisioning, store.StateRunning)
	running.Pool = "alpha"
	must[store.Sandbox](t)(s.UpdateSandbox(ctx, a.ID, t0, func(x *store.Sandbox) error {
		x.Pending = append(x.Pending, running)
		return nil
	}))
	settle(t, d, s)

	all, _ := listEvents(t, s, store.EventFilter{})
	if len(all) != 6 {
		t.Fatalf("all events: %+v", all)
	}
	wantIncreasing(t, "all events", all)
	byID := map[string]store.Sandbox{a.ID: a, b.ID: b, c.ID: c}
	for i, want := range []struct {
		sb  store.Sandbox
		typ store.EventType
	}{{a, store.EventCreated}, {a, store.EventPlaced}, {b, store.EventCreated}, {b, store.EventPlaced},
		{c, store.EventCreated}, {a, store.EventRunning}} {
		got := all[i]
		sb := byID[got.SandboxID]
		if got.SandboxID != want.sb.ID || got.Type != want.typ || got.Org != sb.Org || got.Project != sb.Project {
			t.Fatalf("event %d: %+v, want %s of %s", i, got, want.typ, want.sb.ID)
		}
	}
	// Each event's own cursor continues the listing right after it.
	for i, e := range all {
		if e.Cursor == "" {
			t.Fatalf("event %d has no cursor", i)
		}
		rest, _ := listEvents(t, s, store.EventFilter{After: e.Cursor})
		if !slices.Equal(seqsOf(rest), seqsOf(all[i+1:])) {
			t.Fatalf("after event %d's cursor: %v, want %v", i, seqsOf(rest), seqsOf(all[i+1:]))
		}
	}
	pick := func(keep func(store.Event) bool) []int64 {
		var out []int64
		for _, e := range all {
			if keep(e) {
				out = append(out, e.Seq)
			}
		}
		return out
	}
	for _, tc := range []struct {
		name   string
		filter store.EventFilter
		keep   func(store.Event) bool
	}{
		{"all", store.EventFilter{}, func(store.Event) bool { return true }},
		{"org", store.EventFilter{Org: "org2"}, func(e store.Event) bool { return e.Org == "org2" }},
		{"project", store.EventFilter{Project: "proj2"}, func(e store.Event) bool { return e.Project == "proj2" }},
		{"sandbox", store.EventFilter{SandboxID: a.ID}, func(e store.Event) bool { return e.SandboxID == a.ID }},
		{"pool", store.EventFilter{Pool: "alpha"}, func(e store.Event) bool { return e.Pool == "alpha" }},
		{"types", store.EventFilter{Types: []store.EventType{store.EventPlaced, store.EventRunning}},
			func(e store.Event) bool { return e.Type == store.EventPlaced || e.Type == store.EventRunning }},
		{"combined", store.EventFilter{Org: "org1", Types: []store.EventType{store.EventCreated}},
			func(e store.Event) bool { return e.Org == "org1" && e.Type == store.EventCreated }},
		{"sandbox and type", store.EventFilter{SandboxID: b.ID, Types: []store.EventType{store.EventPlaced}},
			func(e store.Event) bool { return e.SandboxID == b.ID && e.Type == store.EventPlaced }},
		{"no match", store.EventFilter{Pool: "gamma"}, func(store.Event) bool { return false }},
	} {
		want := pick(tc.keep)
		got, _ := listEvents(t, s, tc.filter)
		if !slices.Equal(seqsOf(got), append([]int64{}, want...)) {
			t.Errorf("%s: got seqs %v, want %v", tc.name, seqsOf(got), want)
		}
		// The same, one page of one event at a time.
		paged := tc.filter
		paged.Limit = 1
		got, _ = follow(t, s, paged)
		if !slices.Equal(seqsOf(got), append([]int64{}, want...)) {
			t.Errorf("%s, paged: got seqs %v, want %v", tc.name, seqsOf(got), want)
		}
	}

	// Pages of two: each continues after the last; the empty page after the last
	// gives a cursor that brings only what is appended later.
	var pages [][]int64
	f := store.EventFilter{Limit: 2}
	for {
		items, next := listEvents(t, s, f)
		pages = append(pages, seqsOf(items))
		f.After = next
		if len(items) == 0 {
			break
		}
		if len(pages) > 4 {
			t.Fatalf("pages %v do not end", pages)
		}
	}
	equal(t, "pages of two", pages, [][]int64{seqsOf(all[0:2]), seqsOf(all[2:4]), seqsOf(all[4:6]), {}})
	again, next := listEvents(t, s, f)
	if len(again) != 0 {
		t.Fatalf("an empty page read again: %+v", again)
	}
	poolB, _ := follow(t, s, store.EventFilter{Pool: "beta", Limit: 10})
	_, poolCursor := listEvents(t, s, store.EventFilter{Pool: "beta", After: "", Limit: 10})
	_, bCursor := follow(t, s, store.EventFilter{SandboxID: b.ID, Limit: 10})

	requeued := event(store.EventRequeued, store.StateProvisioning, store.StateQueued)
	requeued.Pool = "beta"
	must[store.Sandbox](t)(s.UpdateSandbox(ctx, b.ID, t0.Add(time.Minute), func(x *store.Sandbox) error {
		x.Pending = append(x.Pending, requeued)
		return nil
	}))
	settle(t, d, s)
	newer, _ := listEvents(t, s, store.EventFilter{Limit: 2, After: next})
	wantEvents(t, "after the empty page", newer, []store.Event{stamped(requeued, b, t0.Add(time.Minute))})
	if newer[0].Seq <= all[5].Seq {
		t.Fatalf("new event's seq %d is not after %d", newer[0].Seq, all[5].Seq)
	}
	newer, _ = listEvents(t, s, store.EventFilter{Pool: "beta", After: poolCursor, Limit: 10})
	if len(poolB) != 1 || len(newer) != 1 || newer[0].Type != store.EventRequeued {
		t.Fatalf("pool beta before %v, after its cursor %+v", seqsOf(poolB), newer)
	}
	newer, _ = listEvents(t, s, store.EventFilter{SandboxID: b.ID, After: bCursor})
	if len(newer) != 1 || newer[0].Type != store.EventRequeued {
		t.Fatalf("sandbox b after its cursor: %+v", newer)
	}

	// Errors.
	enc := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
	for _, bad := range []string{"!!!", enc("nonsense"), enc(`{"s":-1}`), enc(`{"s":1,"q":2}`), enc(`{"s":1}{}`), enc(`{"s":"1"}`)} {
		_, _, err := s.ListEvents(ctx, store.EventFilter{After: bad})
		wantCode(t, err, api.CodeInvalidRequest)
		_, _, err = s.ListEvents(ctx, store.EventFilter{SandboxID: a.ID, After: bad})
		wantCode(t, err, api.CodeInvalidRequest)
	}
	_, _, err := s.ListEvents(ctx, store.EventFilter{Limit: -1})
	wantCode(t, err, api.CodeInvalidRequest)
	_, _, err = s.ListEvents(ctx, store.EventFilter{Types: []store.EventType{"exploded"}})
	wantCode(t, err, api.CodeInvalidRequest)
}

// testEventsFollowEmpty: a follower that starts on an empty log gets a cursor, and
// with it every event appended afterwards.
func testEventsFollowEmpty(t *testing.T, d Driver) {
	s := d.New(t)
	items, next := listEvents(t, s, store.EventFilter{})
	if len(items) != 0 {
		t.Fatalf("events of a new store: %+v", items)
	}
	_, byID := listEvents(t, s, store.EventFilter{SandboxID: "sbx_none"})
	sb := newSandbox("proj1")
	sb.ID = "sbx_none"
	sb.Pending = []store.Event{event(store.EventCreated, "", store.StateQueued)}
	mustCreate(t, s, sb)
	settle(t, d, s)
	for _, f := range []store.EventFilter{{After: next}, {SandboxID: sb.ID, After: byID}} {
		items, _ = listEvents(t, s, f)
		if len(items) != 1 || items[0].SandboxID != sb.ID {
			t.Fatalf("ListEvents(%+v) after the first event: %+v", f, items)
		}
	}
}

// testEventsPrune: each sandbox keeps its newest PerSandbox events; a sandbox terminal
// for longer than AfterTerminal keeps none, and the others keep theirs.
func testEventsPrune(t *testing.T, d Driver) {
	ctx := ctxFor(t)
	s := d.New(t)
	// appendTo writes n events to the sandbox at now, one write each, and can make
	// it terminal with the last.
	appendTo := func(id string, now time.Time, n int, to store.State) {
		for i := range n {
			must[store.Sandbox](t)(s.UpdateSandbox(ctx, id, now, func(x *store.Sandbox) error {
				e := event(store.EventWaiting, x.State, x.State)
				if i == n-1 && to != "" {
					e = event(store.EventTerminated, x.State, to)
					if to == store.StateFailed {
						e.Type = store.EventFailed
					}
					x.State = to
				}
				x.Pending = append(x.Pending, e)
				return nil
			}))
		}
	}
	mk := func(at time.Duration) string {
		sb := store.Sandbox{ID: ids.At("sbx", t0.Add(at)), Org: "org1", Project: "proj1",
			Pending: []store.Event{event(store.EventCreated, "", store.StateQueued)}}
		return mustCreate(t, s, sb).ID
	}
	prune := func(now time.Time, r store.EventRetention) int {
		t.Helper()
		return must[int](t)(s.PruneEvents(ctx, now, r))
	}
	count := func(id string) int { return len(sandboxEvents(t, s, id)) }

	if n := prune(t0, store.EventRetention{PerSandbox: 3, AfterTerminal: time.Hour}); n != 0 {
		t.Fatalf("pruned %d events of an empty log", n)
	}
	_, err := s.PruneEvents(ctx, t0, store.EventRetention{PerSandbox: -1})
	wantCode(t, err, api.CodeInvalidRequest)

	// Per sandbox.
	busy, quiet := mk(0), mk(time.Millisecond)
	appendTo(busy, t0, 4, "")
	appendTo(quiet, t0, 1, "")
	before := sandboxEvents(t, s, busy)
	if n := prune(t0, store.EventRetention{}); n != 0 {
		t.Fatalf("a retention without bounds pruned %d", n)
	}
	if n := prune(t0, store.EventRetention{PerSandbox: 3}); n != 2 {
		t.Fatalf("pruned %d events, want the busy sandbox's oldest 2", n)
	}
	equal(t, "busy sandbox's events kept", seqsOf(sandboxEvents(t, s, busy)), seqsOf(before[2:]))
	equal(t, "quiet sandbox's events", count(quiet), 2)
	if n := prune(t0, store.EventRetention{PerSandbox: 3}); n != 0 {
		t.Fatalf("a second prune deleted %d", n)
	}
	appendTo(busy, t0, 2, "")
	if n := prune(t0, store.EventRetention{PerSandbox: 3}); n != 2 {
		t.Fatalf("pruned %d events after two more, want 2", n)
	}
	// A lower bound applies to every sandbox, old events included.
	if n := prune(t0, store.EventRetention{PerSandbox: 1}); n != 3 {
		t.Fatalf("pruned %d events to one each, want 3", n)
	}
	equal(t, "events kept, one each", []int{count(busy), count(quiet)}, []int{1, 1})

	// After terminal: done ends at t1, failed at t1+2h, live never.
	t1 := t0.Add(time.Hour)
	done, failed, live := mk(2*time.Millisecond), mk(3*time.Millisecond), mk(4*time.Millisecond)
	appendTo(done, t1, 3, store.StateTerminated)
	appendTo(failed, t1.Add(2*time.Hour), 2, store.StateFailed)
	appendTo(live, t1, 2, "")
	r := store.EventRetention{AfterTerminal: 2 * time.Hour}
	if n := prune(t1.Add(time.Hour), r); n != 0 {
		t.Fatalf("pruned %d events of sandboxes terminal for an hour", n)
	}
	if n := prune(t1.Add(2*time.Hour), r); n != 0 {
		t.Fatalf("pruned %d events of a sandbox terminal for exactly the bound", n)
	}
	if n := prune(t1.Add(3*time.Hour), r); n != 4 {
		t.Fatalf("pruned %d events, want the 4 of the sandbox terminated 3h before", n)
	}
	equal(t, "events kept", []int{count(done), count(failed), count(live)}, []int{0, 3, 3})
	if n := prune(t1.Add(5*time.Hour), r); n != 3 {
		t.Fatalf("pruned %d events, want the 3 of the failed sandbox", n)
	}
	equal(t, "events kept at last", []int{count(done), count(failed), count(live), count(busy)}, []int{0, 0, 3, 1})
}
