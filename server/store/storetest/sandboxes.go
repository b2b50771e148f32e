package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/internal/ids"
	"github.com/different-ai/differently/server/store"
)

func newSandbox(project string) store.Sandbox {
	return store.Sandbox{ID: ids.At("sbx", t0), Org: "org1", Project: project}
}

// nthSandbox is newSandbox with the i-th of a run of IDs, which sort as i does.
func nthSandbox(project string, i int) store.Sandbox {
	sb := newSandbox(project)
	sb.ID = ids.At("sbx", t0.Add(time.Duration(i)*time.Millisecond))
	return sb
}

func mustCreate(t *testing.T, s store.Store, sb store.Sandbox) store.Sandbox {
	t.Helper()
	out, created, err := s.CreateSandbox(ctxFor(t), t0, sb)
	if err != nil || !created {
		t.Fatalf("CreateSandbox = created %v, %v", created, err)
	}
	return out
}

func fullSandbox() store.Sandbox {
	return store.Sandbox{
		ID:           ids.At("sbx", t0),
		Org:          "org1",
		Project:      "proj1",
		State:        store.StateRunning,
		Pool:         "alpha",
		Region:       "eu-west",
		BackendRef:   "ref-123",
		Template:     "python:3.12",
		Profile:      "ci",
		Capabilities: []string{"exec.stream", "files"},
		Resources:    adapters.Resources{CPU: 1.5, MemoryMiB: 2048, DiskGiB: 10},
		Labels:       map[string]string{"team": "infra", "differently.dev/x": "y"},
		Env:          map[string]string{"SECRET": "s3cr3t", "EMPTY": ""},
		TTLSeconds:   3600,
		ExpiresAt:    ptr(t0.Add(time.Hour)),
		FromSnapshot: "snap_x",
		Placement:    store.Placement{AllowedPools: []string{"alpha", "beta"}, Regions: []string{"eu-west"}},
		Attempts:     2,
		Reason:       "waiting for capacity",
		// Set explicitly: a caller may schedule the first attempt later.
		NextAttemptAt:  t0.Add(2 * time.Second),
		ClaimedBy:      "replica-1",
		ClaimExpiresAt: ptr(t0.Add(30 * time.Second)),
		IdempotencyKey: "key-1",
		RequestHash:    "sha256:0123abcd",
		InitCommands:   []string{"make deps", "echo \"$GREETING\" > init.txt"},
		AvoidPool:      "gamma",
		AvoidUntil:     ptr(t0.Add(time.Minute)),
	}
}

func testSandboxRoundTrip(t *testing.T, d Driver) {
	ctx := ctxFor(t)
	s := d.New(t)
	in := fullSandbox()
	out := mustCreate(t, s, in)
	want := in
	want.ExpiresAt = ptr(ts(*in.ExpiresAt))
	want.ClaimExpiresAt = ptr(ts(*in.ClaimExpiresAt))
	want.AvoidUntil = ptr(ts(*in.AvoidUntil))
	want.NextAttemptAt = ts(in.NextAttemptAt)
	want.CreatedAt, want.UpdatedAt, want.StateChangedAt, want.Version = ts(t0), ts(t0), ts(t0), 1
	equal(t, "created sandbox", out, want)
	equal(t, "got sandbox", must[store.Sandbox](t)(s.GetSandbox(ctx, in.ID)), want)
	// And through a second store (another process reading the same database).
	equal(t, "reopened sandbox", must[store.Sandbox](t)(d.Reopen(t, s).GetSandbox(ctx, in.ID)), want)

	// Empty collections stay empty rather than becoming nil.
	e := newSandbox("proj1")
	e.Labels, e.Env, e.Capabilities = map[string]string{}, map[string]string{}, []string{}
	got := mustCreate(t, s, e)
	if got.Labels == nil || got.Env == nil || got.Capabilities == nil {
		t.Fatalf("empty collections came back nil: %+v", got)
	}
}

// An admitted create answers with the sandbox as a read returns it, whatever its
// admission set (times to the nanosecond, empty lists, an event), and with maps of
// its own: a driver may answer with the row it wrote rather than read it back.
func testSandboxAdmittedAsRead(t *testing.T, d Driver) {
	ctx := ctxFor(t)
	s := d.New(t)
	for i, in := range []store.Sandbox{fullSandbox(), newSandbox("proj1")} {
		in.ID = fmt.Sprintf("%s_%d", in.ID, i)
		in.State = store.StateQueued
		in.Labels = map[string]string{"a": "b"}
		out, created, err := s.CreateSandboxAdmitted(ctx, t0, in, func(_ store.Admission, x *store.Sandbox) error {
			x.ExpiresAt, x.ClaimExpiresAt = ptr(t0.Add(time.Hour+time.Nanosecond)), ptr(t0.Add(time.Nanosecond))
			x.Placement = store.Placement{AllowedPools: []string{}, Regions: []string{}}
			x.InitCommands = []string{}
			x.Pending = append(x.Pending, event(store.EventCreated, "", store.StateQueued))
			return nil
		})
		if err != nil || !created {
			t.Fatalf("create %d: created %v, %v", i, created, err)
		}
		equal(t, "admitted sandbox", out, must[store.Sandbox](t)(s.GetSandbox(ctx, in.ID)))
		in.Labels["a"] = "changed"
		if out.Labels["a"] != "b" {
			t.Fatal("the answer shares the request's labels")
		}
	}
}

func testSandboxCreate(t *testing.T, d Driver) {
	ctx := ctxFor(t)
	s := d.New(t)
	sb := newSandbox("proj1")
	out := mustCreate(t, s, sb)
	if out.State != store.StateQueued || out.Version != 1 || out.NextAttemptAt != ts(t0) ||
		out.ExpiresAt != nil || out.ClaimExpiresAt != nil || out.Labels != nil {
		t.Fatalf("defaults not applied: %s", show(out))
	}
	_, _, err := s.CreateSandbox(ctx, t0, sb)
	wantCode(t, err, api.CodeInvalidState)
	_, _, err = s.CreateSandbox(ctx, t0, store.Sandbox{Project: "p"})
	wantCode(t, err, api.CodeInvalidRequest)
	bad := newSandbox("proj1")
	bad.State = "sleeping"
	_, _, err = s.CreateSandbox(ctx, t0, bad)
	wantCode(t, err, api.CodeInvalidRequest)
	_, err = s.GetSandbox(ctx, "sbx_missing")
	wantCode(t, err, api.CodeNotFound)

	if !store.StateTerminated.IsTerminal() || !store.StateFailed.IsTerminal() || store.StateTerminating.IsTerminal() {
		t.Fatal("IsTerminal is wrong")
	}
}

func testSandboxIdempotencyKey(t *testing.T, d Driver) {
	ctx := ctxFor(t)
	s := d.New(t)
	a := newSandbox("proj1")
	a.IdempotencyKey = "k"
	first := mustCreate(t, s, a)
	b := newSandbox("proj1")
	b.IdempotencyKey = "k"
	again, created, err := s.CreateSandbox(ctx, t0.Add(time.Second), b)
	noErr(t, err)
	if created {
		t.Fatal("second create with the same key created a sandbox")
	}
	equal(t, "repeated create", again, first)
	// The key is per project, a project being its organisation and its name, and
	// sandboxes without a key never collide.
	c := newSandbox("proj2")
	c.IdempotencyKey = "k"
	mustCreate(t, s, c)
	elsewhere := newSandbox("proj1")
	elsewhere.Org, elsewhere.IdempotencyKey = "org2", "k"
	if got := mustCreate(t, s, elsewhere); got.ID == first.ID || got.Org != "org2" {
		t.Fatalf("another organisation's project of the same name got %s of %s", got.ID, got.Org)
	}
	mustCreate(t, s, newSandbox("proj1"))
	mustCreate(t, s, newSandbox("proj1"))
}

// The hash of the request that created a sandbox is kept with its idempotency key: a
// repeated key returns the first sandbox with the first request's hash, whichever
// path the create takes (no quota, a quota, no admission), so that the caller can
// tell a retry from another request reusing the key.
func testSandboxRequestHash(t *testing.T, d Driver) {
	ctx := ctxFor(t)
	s := d.New(t)
	must[store.Project](t)(s.PutProject(ctx, t0, store.Project{Org: "org1", Name: "limited", Quota: store.Quota{Sandboxes: 5}}))
	for _, tc := range []struct {
		name, project string
		create        func(sb store.Sandbox) (store.Sandbox, bool, error)
	}{
		{"plain", "plain", func(sb store.Sandbox) (store.Sandbox, bool, error) { return s.CreateSandbox(ctx, t0, sb) }},
		{"admitted", "open", func(sb store.Sandbox) (store.Sandbox, bool, error) {
			return s.CreateSandboxAdmitted(ctx, t0, sb, admitQuota(sb))
		}},
		{"admitted under a quota", "limited", func(sb store.Sandbox) (store.Sandbox, bool, error) {
			return s.CreateSandboxAdmitted(ctx, t0, sb, admitQuota(sb))
		}},
	} {
		first := newSandbox(tc.project)
		first.ID = ids.New("sbx")
		first.IdempotencyKey, first.RequestHash = "k", "sha256:first"
		out, created, err := tc.create(first)
		if err != nil || !created || out.RequestHash != "sha256:first" {
			t.Fatalf("%s: first create: created %v, hash %q, %v", tc.name, created, out.RequestHash, err)
		}
		other := newSandbox(tc.project)
		other.ID = ids.New("sbx")
		other.IdempotencyKey, other.RequestHash = "k", "sha256:other"
		again, created, err := tc.create(other)
		if err != nil || created || again.ID != first.ID || again.RequestHash != "sha256:first" {
			t.Fatalf("%s: repeated key: %s created %v, hash %q, %v; want %s with the first hash",
				tc.name, again.ID, created, again.RequestHash, err, first.ID)
		}
		if got := must[store.Sandbox](t)(d.Reopen(t, s).GetSandbox(ctx, first.ID)); got.RequestHash != "sha256:first" {
			t.Fatalf("%s: stored hash %q", tc.name, got.RequestHash)
		}
	}
}

func testSandboxIdempotencyKeyConcurrent(t *testing.T, d Driver) {
	ctx := ctxFor(t)
	s := d.New(t)
	other := d.Reopen(t, s)
	const n = 8
	type result struct {
		id      string
		created bool
	}
	results := make([]result, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st := s
			if i%2 == 1 {
				st = other
			}
			sb := newSandbox("proj1")
			sb.IdempotencyKey = "same"
			out, created, err := st.CreateSandbox(ctx, t0, sb)
			if err != nil {
				t.Error(err)
				return
			}
			results[i] = result{out.ID, created}
		}()
	}
	wg.Wait()
	createdCount := 0
	for _, r := range results {
		if r.created {
			createdCount++
		}
		if r.id != results[0].id {
			t.Fatalf("creates with one key returned different sandboxes: %+v", results)
		}
	}
	if createdCount != 1 {
		t.Fatalf("%d creates reported created, want 1: %+v", createdCount, results)
	}
	items, _ := list(t, s, store.SandboxFilter{Project: "proj1"})
	if len(items) != 1 {
		t.Fatalf("%d sandboxes stored, want 1", len(items))
	}
}

// testSandboxUpdate runs through UpdateSandbox and through a batch of one: both
// write every column and return what they stored.
func testSandboxUpdate(t *testing.T, d Driver) {
	for _, via := range []struct {
		name   string
		update func(s store.Store, id string, now time.Time, fn func(*store.Sandbox) error) (store.Sandbox, error)
	}{
		{"UpdateSandbox", func(s store.Store, id string, now time.Time, fn func(*store.Sandbox) error) (store.Sandbox, error) {
			return s.UpdateSandbox(ctxFor(t), id, now, fn)
		}},
		{"UpdateSandboxes", func(s store.Store, id string, now time.Time, fn func(*store.Sandbox) error) (store.Sandbox, error) {
			out, errs, err := s.UpdateSandboxes(ctxFor(t), []string{id}, now, func(_ int, x *store.Sandbox) error { return fn(x) })
			if err != nil {
				return store.Sandbox{}, err
			}
			return out[0], errs[0]
		}},
	} {
		t.Run(via.name, func(t *testing.T) { testSandboxUpdateVia(t, d, via.update) })
	}
}

func testSandboxUpdateVia(t *testing.T, d Driver, update func(s store.Store, id string, now time.Time, fn func(*store.Sandbox) error) (store.Sandbox, error)) {
	ctx := ctxFor(t)
	s := d.New(t)
	sb := mustCreate(t, s, fullSandbox())
	t1, t2, t3 := t0.Add(time.Minute), t0.Add(2*time.Minute), t0.Add(3*time.Minute)

	// A change without a state change keeps StateChangedAt.
	got := must[store.Sandbox](t)(update(s, sb.ID, t1, func(x *store.Sandbox) error {
		x.Labels["new"] = "label"
		x.Reason = "r"
		x.ID, x.CreatedAt, x.Version = "sbx_other", t2, 99 // not writable through fn
		return nil
	}))
	want := sb
	want.Labels = map[string]string{"team": "infra", "differently.dev/x": "y", "new": "label"}
	want.Reason = "r"
	want.UpdatedAt, want.Version = ts(t1), 2
	equal(t, "updated", got, want)
	equal(t, "stored", must[store.Sandbox](t)(s.GetSandbox(ctx, sb.ID)), want)
	if len(sb.Labels) != 2 {
		t.Fatal("the update changed the caller's earlier value through a shared map")
	}

	// A state change stamps StateChangedAt; clearing optional times stores NULL.
	got = must[store.Sandbox](t)(update(s, sb.ID, t2, func(x *store.Sandbox) error {
		x.State = store.StateStopped
		x.ExpiresAt, x.ClaimExpiresAt, x.ClaimedBy = nil, nil, ""
		x.AvoidPool, x.AvoidUntil = "", nil
		return nil
	}))
	if got.StateChangedAt != ts(t2) || got.UpdatedAt != ts(t2) || got.Version != 3 ||
		got.ExpiresAt != nil || got.ClaimExpiresAt != nil || got.AvoidPool != "" || got.AvoidUntil != nil {
		t.Fatalf("state change not recorded: %s", show(got))
	}
	equal(t, "stored after state change", must[store.Sandbox](t)(s.GetSandbox(ctx, sb.ID)), got)

	// Every writable column changes at once, and optional times come back.
	got = must[store.Sandbox](t)(update(s, sb.ID, t3, func(x *store.Sandbox) error {
		x.Org, x.Project, x.State, x.Pool, x.Region = "org2", "proj2", store.StateRunning, "beta", "us-east"
		x.BackendRef, x.Template, x.Profile = "ref-456", "node:22", "big"
		x.Capabilities = []string{"files"}
		x.Resources = adapters.Resources{CPU: 0.25, MemoryMiB: 512, DiskGiB: 3}
		x.Labels, x.Env = map[string]string{"a": "b"}, map[string]string{"K": "v \"quoted\"\n"}
		x.TTLSeconds, x.ExpiresAt, x.FromSnapshot = 60, ptr(t3.Add(time.Minute)), "snap_y"
		x.Placement = store.Placement{Regions: []string{"us-east"}}
		x.Attempts, x.Reason, x.NextAttemptAt = 7, "ünïcode reason", t3.Add(time.Second)
		x.ClaimedBy, x.ClaimExpiresAt, x.IdempotencyKey = "replica-2", ptr(t3.Add(time.Hour)), "key-2"
		x.AvoidPool, x.AvoidUntil = "delta", ptr(t3.Add(2*time.Minute))
		x.RequestHash = "sha256:changed"     // never changes: it names the create request
		x.InitCommands = []string{"changed"} // never changes: the create recorded them
		return nil
	}))
	want = got
	want.Org, want.Project, want.State, want.Pool, want.Region = "org2", "proj2", store.StateRunning, "beta", "us-east"
	want.BackendRef, want.Template, want.Profile = "ref-456", "node:22", "big"
	want.Capabilities = []string{"files"}
	want.Resources = adapters.Resources{CPU: 0.25, MemoryMiB: 512, DiskGiB: 3}
	want.Labels, want.Env = map[string]string{"a": "b"}, map[string]string{"K": "v \"quoted\"\n"}
	want.TTLSeconds, want.ExpiresAt, want.FromSnapshot = 60, ptr(ts(t3.Add(time.Minute))), "snap_y"
	want.Placement = store.Placement{Regions: []string{"us-east"}}
	want.Attempts, want.Reason, want.NextAttemptAt = 7, "ünïcode reason", ts(t3.Add(time.Second))
	want.ClaimedBy, want.ClaimExpiresAt, want.IdempotencyKey = "replica-2", ptr(ts(t3.Add(time.Hour))), "key-2"
	want.AvoidPool, want.AvoidUntil = "delta", ptr(ts(t3.Add(2*time.Minute)))
	want.ID, want.CreatedAt, want.UpdatedAt, want.StateChangedAt, want.Version = sb.ID, sb.CreatedAt, ts(t3), ts(t3), 4
	want.RequestHash, want.InitCommands = sb.RequestHash, sb.InitCommands
	equal(t, "every column", got, want)
	equal(t, "stored after every column", must[store.Sandbox](t)(s.GetSandbox(ctx, sb.ID)), want)

	// Empty values come back as a read returns them, however the callback left
	// them: a driver may answer with the row it computed rather than read it back.
	got = must[store.Sandbox](t)(update(s, sb.ID, t3, func(x *store.Sandbox) error {
		x.Capabilities, x.Labels, x.Env = []string{}, map[string]string{}, nil
		x.Placement = store.Placement{AllowedPools: []string{}, Regions: []string{}}
		x.ExpiresAt, x.Reason = ptr(t3.Add(time.Nanosecond)), "nul \x00"
		return nil
	}))
	equal(t, "stored with empty values", must[store.Sandbox](t)(s.GetSandbox(ctx, sb.ID)), got)

	_, err := update(s, "sbx_missing", t2, func(*store.Sandbox) error { return nil })
	wantCode(t, err, api.CodeNotFound)
	_, err = update(s, sb.ID, t2, func(x *store.Sandbox) error { x.State = "bogus"; return nil })
	wantCode(t, err, api.CodeInvalidRequest)
}

func testSandboxUpdateAbort(t *testing.T, d Driver) {
	ctx := ctxFor(t)
	s := d.New(t)
	sb := mustCreate(t, s, fullSandbox())
	abort := api.Errorf(api.CodeInvalidState, "cannot stop a queued sandbox")
	_, err := s.UpdateSandbox(ctx, sb.ID, t0.Add(time.Hour), func(x *store.Sandbox) error {
		x.State, x.Attempts, x.Labels["k"] = store.StateFailed, 9, "v"
		return abort
	})
	if !errors.Is(err, abort) {
		t.Fatalf("UpdateSandbox returned %v, want fn's error", err)
	}
	equal(t, "after abort", must[store.Sandbox](t)(s.GetSandbox(ctx, sb.ID)), sb)
}

// A callback that panics ends its transaction: nothing is written, the panic
// reaches the caller, and the row is not left locked by a transaction that nobody
// will end (a second replica's update of it goes through before the test's
// deadline), nor the driver short of a connection.
// A reason quoting a backend's words is stored whatever bytes they hold: a NUL or
// invalid UTF-8 (which PostgreSQL's text refuses) becomes U+FFFD, on create and on
// update, rather than fail the write that records the sandbox's outcome.
func testSandboxReasonFromABackend(t *testing.T, d Driver) {
	ctx := ctxFor(t)
	s := d.New(t)
	in := newSandbox("proj1")
	in.Reason = "queued\x00"
	sb := mustCreate(t, s, in)
	if sb.Reason != "queued\uFFFD" {
		t.Fatalf("created with reason %q", sb.Reason)
	}
	out, err := s.UpdateSandbox(ctx, sb.ID, t0.Add(time.Hour), func(x *store.Sandbox) error {
		x.State, x.Reason = store.StateFailed, "pool p: backend said \xff\xfe and \x00"
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.GetSandbox(ctx, sb.ID)
	if err != nil {
		t.Fatal(err)
	}
	if want := "pool p: backend said \uFFFD and \uFFFD"; out.Reason != want || got.Reason != want {
		t.Fatalf("reason %q, read back %q, want %q", out.Reason, got.Reason, want)
	}
}

func testSandboxUpdatePanic(t *testing.T, d Driver) {
	ctx := ctxFor(t)
	s := d.New(t)
	other := d.Reopen(t, s)
	sb := mustCreate(t, s, newSandbox("proj1"))
	for _, call := range []struct {
		name string
		run  func(fn func(*store.Sandbox) error)
	}{
		{"UpdateSandbox", func(fn func(*store.Sandbox) error) {
			_, _ = s.UpdateSandbox(ctx, sb.ID, t0.Add(time.Hour), fn)
		}},
		{"UpdateSandboxes", func(fn func(*store.Sandbox) error) {
			_, _, _ = s.UpdateSandboxes(ctx, []string{sb.ID}, t0.Add(time.Hour), func(_ int, x *store.Sandbox) error { return fn(x) })
		}},
	} {
		got := func() (p any) {
			defer func() { p = recover() }()
			call.run(func(x *store.Sandbox) error {
				x.Attempts = 99
				panic("boom")
			})
			return nil
		}()
		if got != "boom" {
			t.Fatalf("%s: recovered %v, want the callback's panic", call.name, got)
		}
		// Bounded, so that a row left locked fails the test instead of hanging it.
		bounded, cancel := context.WithTimeout(ctx, 30*time.Second)
		after, err := other.UpdateSandbox(bounded, sb.ID, t0.Add(2*time.Hour), func(x *store.Sandbox) error {
			x.Reason = "after " + call.name
			return nil
		})
		cancel()
		if err != nil {
			t.Fatalf("an update after %s's panic: %v (the row stayed locked?)", call.name, err)
		}
		if after.Attempts == 99 {
			t.Fatalf("%s's panicking callback was written", call.name)
		}
	}
}

func testSandboxUpdateConcurrent(t *testing.T, d Driver) {
	ctx := ctxFor(t)
	s := d.New(t)
	other := d.Reopen(t, s)
	sb := mustCreate(t, s, newSandbox("proj1"))
	const n = 20
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st := s
			if i%2 == 1 {
				st = other
			}
			_, err := st.UpdateSandbox(ctx, sb.ID, t0.Add(time.Duration(i)*time.Second), func(x *store.Sandbox) error {
				x.Attempts++
				return nil
			})
			if err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	got := must[store.Sandbox](t)(s.GetSandbox(ctx, sb.ID))
	if got.Attempts != n || got.Version != n+1 {
		t.Fatalf("after %d concurrent increments: attempts %d, version %d", n, got.Attempts, got.Version)
	}
}
