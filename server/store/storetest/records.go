package storetest

import (
	"crypto/sha256"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/internal/ids"
	"github.com/different-ai/differently/server/store"
)

func testSnapshots(t *testing.T, d Driver) {
	ctx := ctxFor(t)
	s := d.New(t)
	sb := mustCreate(t, s, newSandbox("proj1"))
	in := store.Snapshot{ID: ids.At("snap", t0), SandboxID: sb.ID, Org: "org1", Project: "proj1", Pool: "alpha",
		BackendRef: "bref", Kind: "disk", SizeBytes: 1 << 40, State: "ready"}
	out := must[store.Snapshot](t)(s.CreateSnapshot(ctx, t0, in))
	want := in
	want.CreatedAt = ts(t0)
	equal(t, "created snapshot", out, want)
	equal(t, "got snapshot", must[store.Snapshot](t)(s.GetSnapshot(ctx, in.ID)), want)
	_, err := s.CreateSnapshot(ctx, t0, in)
	wantCode(t, err, api.CodeInvalidState)
	_, err = s.CreateSnapshot(ctx, t0, store.Snapshot{ID: "snap_x"})
	wantCode(t, err, api.CodeInvalidRequest)

	second := in
	second.ID, second.Kind = ids.At("snap", t0), "memory"
	must[store.Snapshot](t)(s.CreateSnapshot(ctx, t0, second))
	other := in
	other.ID, other.SandboxID = ids.At("snap", t0), "sbx_other"
	must[store.Snapshot](t)(s.CreateSnapshot(ctx, t0, other))
	var got []string
	for _, sn := range must[[]store.Snapshot](t)(s.ListSnapshots(ctx, sb.ID)) {
		got = append(got, sn.ID)
	}
	want2 := []string{in.ID, second.ID}
	slices.Sort(want2)
	equal(t, "snapshots of the sandbox", got, want2)

	// Pages of every snapshot, or of a project's, or of a sandbox's, in ID order.
	foreign := in
	foreign.ID, foreign.SandboxID, foreign.Org, foreign.Project = ids.At("snap", t0), "sbx_foreign", "org2", "proj2"
	must[store.Snapshot](t)(s.CreateSnapshot(ctx, t0, foreign))
	all := []string{in.ID, second.ID, other.ID, foreign.ID}
	slices.Sort(all)
	page := func(f store.SnapshotFilter) ([]string, string) {
		t.Helper()
		items, next, err := s.ListSnapshotPage(ctx, f)
		noErr(t, err)
		var got []string
		for _, sn := range items {
			got = append(got, sn.ID)
		}
		return got, next
	}
	mine := slices.DeleteFunc(slices.Clone(all), func(id string) bool { return id == foreign.ID })
	for _, tc := range []struct {
		name string
		f    store.SnapshotFilter
		want []string
	}{
		{"every snapshot", store.SnapshotFilter{}, all},
		{"a project's", store.SnapshotFilter{Org: "org1", Project: "proj1"}, mine},
		{"a project's, in any organisation", store.SnapshotFilter{Project: "proj2"}, []string{foreign.ID}},
		{"an organisation's", store.SnapshotFilter{Org: "org2"}, []string{foreign.ID}},
		{"a sandbox's", store.SnapshotFilter{SandboxID: sb.ID}, want2},
		{"a sandbox's in another project", store.SnapshotFilter{Org: "org2", SandboxID: sb.ID}, nil},
	} {
		got, next := page(tc.f)
		equal(t, tc.name, got, tc.want)
		equal(t, tc.name+": next cursor", next, "")
	}
	var paged []string
	f := store.SnapshotFilter{Limit: 3}
	for range len(all) {
		got, next := page(f)
		paged = append(paged, got...)
		if next == "" {
			break
		}
		f.Cursor = next
	}
	equal(t, "every snapshot, three at a time", paged, all)
	_, _, err = s.ListSnapshotPage(ctx, store.SnapshotFilter{Cursor: "bogus"})
	wantCode(t, err, api.CodeInvalidRequest)
	_, _, err = s.ListSnapshotPage(ctx, store.SnapshotFilter{Limit: -1})
	wantCode(t, err, api.CodeInvalidRequest)

	noErr(t, s.DeleteSnapshot(ctx, in.ID))
	_, err = s.GetSnapshot(ctx, in.ID)
	wantCode(t, err, api.CodeNotFound)
	wantCode(t, s.DeleteSnapshot(ctx, in.ID), api.CodeNotFound)
}

func testTokens(t *testing.T, d Driver) {
	ctx := ctxFor(t)
	s := d.New(t)
	hash := sha256.Sum256([]byte("secret-1"))
	in := store.Token{ID: ids.At("tok", t0), Hash: hash[:], Scope: store.ScopeProject, Org: "org1",
		Project: "proj1", Name: "ci", ExpiresAt: ptr(t0.Add(90 * time.Minute))}
	out := must[store.Token](t)(s.CreateToken(ctx, t0, in))
	want := in
	want.CreatedAt, want.ExpiresAt = ts(t0), ptr(ts(*in.ExpiresAt))
	equal(t, "created token", out, want)
	equal(t, "token by hash", must[store.Token](t)(s.TokenByHash(ctx, hash[:])), want)

	wrong := sha256.Sum256([]byte("secret-2"))
	_, err := s.TokenByHash(ctx, wrong[:])
	wantCode(t, err, api.CodeNotFound)
	dup := in
	dup.ID = ids.At("tok", t0) // same hash, new ID
	_, err = s.CreateToken(ctx, t0, dup)
	wantCode(t, err, api.CodeInvalidState)
	_, err = s.CreateToken(ctx, t0, store.Token{ID: "tok_x", Hash: wrong[:], Scope: "root"})
	wantCode(t, err, api.CodeInvalidRequest)

	admin := store.Token{ID: ids.At("tok", t0), Hash: wrong[:], Scope: store.ScopeAdmin, Name: "bootstrap"}
	must[store.Token](t)(s.CreateToken(ctx, t0, admin))
	t1 := t0.Add(time.Hour)
	noErr(t, s.TouchToken(ctx, in.ID, t1))
	want.LastUsedAt = ptr(ts(t1))
	equal(t, "touched token", must[store.Token](t)(s.TokenByHash(ctx, hash[:])), want)
	wantCode(t, s.TouchToken(ctx, "tok_missing", t1), api.CodeNotFound)

	toks := must[[]store.Token](t)(s.ListTokens(ctx))
	wantIDs := []string{in.ID, admin.ID}
	slices.Sort(wantIDs)
	if len(toks) != 2 || toks[0].ID != wantIDs[0] || toks[1].ID != wantIDs[1] {
		t.Fatalf("ListTokens = %v", toks)
	}
	noErr(t, s.DeleteToken(ctx, in.ID))
	_, err = s.TokenByHash(ctx, hash[:])
	wantCode(t, err, api.CodeNotFound)
	wantCode(t, s.DeleteToken(ctx, in.ID), api.CodeNotFound)
}

func testPolicy(t *testing.T, d Driver) {
	ctx := ctxFor(t)
	s := d.New(t)
	equal(t, "default policy", must[store.Policy](t)(s.GetPolicy(ctx)), store.Policy{})
	p := store.Policy{AllowExternal: true, ExternalPools: []string{"daytona"},
		Defaults: map[string]any{"ttlSeconds": 3600.0, "resources": map[string]any{"cpu": 1.0}}}
	noErr(t, s.PutPolicy(ctx, p))
	equal(t, "stored policy", must[store.Policy](t)(s.GetPolicy(ctx)), p)
	noErr(t, s.PutPolicy(ctx, store.Policy{}))
	equal(t, "reset policy", must[store.Policy](t)(s.GetPolicy(ctx)), store.Policy{})
}

func testLease(t *testing.T, d Driver) {
	ctx := ctxFor(t)
	s := d.New(t)
	try := func(holder string, at time.Duration, want bool) {
		t.Helper()
		got, err := s.TryLease(ctx, "leader", holder, t0.Add(at), 10*time.Second)
		noErr(t, err)
		if got != want {
			t.Fatalf("TryLease(%s, t0+%v) = %v, want %v", holder, at, got, want)
		}
	}
	try("a", 0, true)
	try("b", 5*time.Second, false)
	try("a", 5*time.Second, true) // renew: now expires at t0+15s
	try("b", 14*time.Second, false)
	try("b", 15*time.Second, true) // expired exactly now
	try("a", 16*time.Second, false)
	// Another lease name is independent.
	got, err := s.TryLease(ctx, "other", "a", t0.Add(16*time.Second), time.Second)
	noErr(t, err)
	if !got {
		t.Fatal("an unrelated lease was taken")
	}
	noErr(t, s.ReleaseLease(ctx, "leader", "a")) // not a's: nothing happens
	try("a", 17*time.Second, false)
	noErr(t, s.ReleaseLease(ctx, "leader", "b"))
	try("a", 17*time.Second, true)
}

func testLeaseConcurrent(t *testing.T, d Driver) {
	ctx := ctxFor(t)
	s := d.New(t)
	other := d.Reopen(t, s)
	var mu sync.Mutex
	var winners []string
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st := s
			if i%2 == 1 {
				st = other
			}
			holder := string(rune('a' + i))
			ok, err := st.TryLease(ctx, "leader", holder, t0, time.Minute)
			if err != nil {
				t.Error(err)
			}
			if ok {
				mu.Lock()
				winners = append(winners, holder)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(winners) != 1 {
		t.Fatalf("lease holders: %v, want exactly one", winners)
	}
}
