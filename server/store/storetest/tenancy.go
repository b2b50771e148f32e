package storetest

import (
	"errors"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/internal/ids"
	"github.com/different-ai/differently/server/store"
)

func testProjectRoundTrip(t *testing.T, d Driver) {
	ctx := ctxFor(t)
	s := d.New(t)
	_, err := s.GetProject(ctx, "acme", "ci")
	wantCode(t, err, api.CodeNotFound)
	equal(t, "empty list", len(must[[]store.Project](t)(s.ListProjects(ctx))), 0)

	q := store.Quota{Sandboxes: 5, CPU: 2.5, MemoryMiB: 4096, DiskGiB: 20}
	got := must[store.Project](t)(s.PutProject(ctx, t0, store.Project{Org: "acme", Name: "ci", Quota: q}))
	want := store.Project{Org: "acme", Name: "ci", Quota: q, CreatedAt: ts(t0), UpdatedAt: ts(t0), Version: 1}
	equal(t, "put", got, want)
	equal(t, "get", must[store.Project](t)(s.GetProject(ctx, "acme", "ci")), want)

	// A replace keeps CreatedAt, bumps the version; zero quotas are stored as zero.
	t1 := t0.Add(time.Minute)
	got = must[store.Project](t)(s.PutProject(ctx, t1, store.Project{Org: "acme", Name: "ci", Quota: store.Quota{Sandboxes: 1}}))
	want = store.Project{Org: "acme", Name: "ci", Quota: store.Quota{Sandboxes: 1}, CreatedAt: ts(t0), UpdatedAt: ts(t1), Version: 2}
	equal(t, "replace", got, want)

	// The same name in another org is another project.
	must[store.Project](t)(s.PutProject(ctx, t0, store.Project{Org: "beta", Name: "ci"}))
	must[store.Project](t)(s.PutProject(ctx, t0, store.Project{Org: "acme", Name: "a"}))
	var keys []string
	for _, p := range must[[]store.Project](t)(s.ListProjects(ctx)) {
		keys = append(keys, p.Org+"/"+p.Name)
	}
	equal(t, "list order", keys, []string{"acme/a", "acme/ci", "beta/ci"})

	_, err = s.PutProject(ctx, t0, store.Project{Org: "acme", Name: "x", Quota: store.Quota{CPU: -1}})
	wantCode(t, err, api.CodeInvalidRequest)
	_, err = s.PutProject(ctx, t0, store.Project{Org: "acme"})
	wantCode(t, err, api.CodeInvalidRequest)
}

func testProjectUsageAndDelete(t *testing.T, d Driver) {
	ctx := ctxFor(t)
	s := d.New(t)
	equal(t, "usage of an unknown project", must[store.Usage](t)(s.ProjectUsage(ctx, "acme", "ci")), store.Usage{})
	mk := func(org, project string, state store.State, r adapters.Resources) store.Sandbox {
		sb := store.Sandbox{ID: ids.At("sbx", t0), Org: org, Project: project, State: state, Resources: r}
		return mustCreate(t, s, sb)
	}
	r := adapters.Resources{CPU: 1.5, MemoryMiB: 1024, DiskGiB: 10}
	mk("acme", "ci", store.StateQueued, r)
	mk("acme", "ci", store.StateRunning, r)
	mk("acme", "ci", store.StateTerminating, adapters.Resources{CPU: 0.5})
	mk("acme", "ci", store.StateTerminated, r) // terminal: not counted
	mk("acme", "ci", store.StateFailed, r)
	mk("acme", "other", store.StateRunning, r)
	mk("beta", "ci", store.StateRunning, r)
	equal(t, "usage", must[store.Usage](t)(s.ProjectUsage(ctx, "acme", "ci")),
		store.Usage{Sandboxes: 3, CPU: 3.5, MemoryMiB: 2048, DiskGiB: 20})

	wantCode(t, s.DeleteProject(ctx, "acme", "ci"), api.CodeNotFound)
	must[store.Project](t)(s.PutProject(ctx, t0, store.Project{Org: "acme", Name: "ci", Quota: store.Quota{Sandboxes: 9}}))
	wantCode(t, s.DeleteProject(ctx, "acme", "ci"), api.CodeInvalidState)
	for _, sb := range must[[]store.Sandbox](t)(func() ([]store.Sandbox, error) {
		items, _, err := s.ListSandboxes(ctx, store.SandboxFilter{Org: "acme", Project: "ci"})
		return items, err
	}()) {
		if sb.State.IsTerminal() {
			continue
		}
		must[store.Sandbox](t)(s.UpdateSandbox(ctx, sb.ID, t0, func(cur *store.Sandbox) error {
			cur.State = store.StateTerminated
			return nil
		}))
	}
	noErr(t, s.DeleteProject(ctx, "acme", "ci"))
	_, err := s.GetProject(ctx, "acme", "ci")
	wantCode(t, err, api.CodeNotFound)
	wantCode(t, s.DeleteProject(ctx, "acme", "ci"), api.CodeNotFound)
}

// testProjectUsageSaturates: rows stored before the API bounded resources may hold
// any value. Their sums saturate instead of failing (or wrapping), so that the
// project's usage can still be read, and its quota still refuses.
func testProjectUsageSaturates(t *testing.T, d Driver) {
	ctx := ctxFor(t)
	s := d.New(t)
	huge := adapters.Resources{CPU: 1e308, MemoryMiB: math.MaxInt64, DiskGiB: math.MaxInt64}
	for range 2 {
		mustCreate(t, s, store.Sandbox{ID: ids.New("sbx"), Org: "acme", Project: "big", State: store.StateRunning, Resources: huge})
	}
	want := store.Usage{Sandboxes: 2, CPU: math.MaxFloat64, MemoryMiB: math.MaxInt64, DiskGiB: math.MaxInt64}
	equal(t, "usage", must[store.Usage](t)(s.ProjectUsage(ctx, "acme", "big")), want)

	must[store.Project](t)(s.PutProject(ctx, t0, store.Project{Org: "acme", Name: "big",
		Quota: store.Quota{CPU: 4, MemoryMiB: 1024, DiskGiB: 10}}))
	sb := store.Sandbox{ID: ids.New("sbx"), Org: "acme", Project: "big", State: store.StateQueued,
		Resources: adapters.Resources{CPU: 1, MemoryMiB: 1, DiskGiB: 1}}
	var seen store.Usage
	_, _, err := s.CreateSandboxAdmitted(ctx, t0, sb, func(a store.Admission, ins *store.Sandbox) error {
		seen = a.Usage
		return admitQuota(sb)(a, ins)
	})
	wantCode(t, err, api.CodeQuotaExceeded)
	equal(t, "usage at admission", seen, want)
}

// testProjectDeleteRevokesTokens: a project's tokens go with its declaration, so
// that no token outlives the quota that bounded it; other projects' tokens stay.
func testProjectDeleteRevokesTokens(t *testing.T, d Driver) {
	ctx := ctxFor(t)
	s := d.New(t)
	mk := func(org, project string) []byte {
		hash := []byte(ids.New("hash") + "-0123456789abcdef")
		scope := store.ScopeProject
		if project == "" {
			scope = store.ScopeAdmin
		}
		must[store.Token](t)(s.CreateToken(ctx, t0, store.Token{ID: ids.New("tok"), Hash: hash, Scope: scope, Org: org, Project: project}))
		return hash
	}
	gone := [][]byte{mk("acme", "ci"), mk("acme", "ci")}
	kept := [][]byte{mk("acme", "other"), mk("beta", "ci"), mk("", "")}
	must[store.Project](t)(s.PutProject(ctx, t0, store.Project{Org: "acme", Name: "ci", Quota: store.Quota{Sandboxes: 1}}))

	// A refused delete revokes nothing.
	live := mustCreate(t, s, store.Sandbox{ID: ids.New("sbx"), Org: "acme", Project: "ci", State: store.StateRunning})
	wantCode(t, s.DeleteProject(ctx, "acme", "ci"), api.CodeInvalidState)
	for _, h := range gone {
		must[store.Token](t)(s.TokenByHash(ctx, h))
	}
	must[store.Sandbox](t)(s.UpdateSandbox(ctx, live.ID, t0, func(cur *store.Sandbox) error {
		cur.State = store.StateTerminated
		return nil
	}))

	noErr(t, s.DeleteProject(ctx, "acme", "ci"))
	for _, h := range gone {
		_, err := s.TokenByHash(ctx, h)
		wantCode(t, err, api.CodeNotFound)
	}
	for _, h := range kept {
		must[store.Token](t)(s.TokenByHash(ctx, h))
	}
	// The default organisation's tokens may be stored without their org.
	must[store.Project](t)(s.PutProject(ctx, t0, store.Project{Org: "default", Name: "ci"}))
	bare := mk("", "ci")
	noErr(t, s.DeleteProject(ctx, "default", "ci"))
	_, err := s.TokenByHash(ctx, bare)
	wantCode(t, err, api.CodeNotFound)
}

// admitQuota is the admission the API runs: the project's quota and nothing else.
func admitQuota(sb store.Sandbox) func(store.Admission, *store.Sandbox) error {
	return func(a store.Admission, _ *store.Sandbox) error {
		return store.CheckQuota(sb.Org, sb.Project, a.Quota, a.Usage, sb.Resources)
	}
}

func testSandboxAdmission(t *testing.T, d Driver) {
	ctx := ctxFor(t)
	s := d.New(t)
	must[store.Project](t)(s.PutProject(ctx, t0, store.Project{Org: "org1", Name: "p",
		Quota: store.Quota{Sandboxes: 2, MemoryMiB: 3072}}))
	mk := func(key string, mem int64) store.Sandbox {
		sb := newSandbox("p")
		sb.IdempotencyKey, sb.Resources.MemoryMiB = key, mem
		return sb
	}
	// What admit sees: the quota, the usage without the new sandbox, the queue.
	var seen store.Admission
	first := mk("k1", 1024)
	out, created, err := s.CreateSandboxAdmitted(ctx, t0, first, func(a store.Admission, _ *store.Sandbox) error {
		seen = a
		return admitQuota(first)(a, nil)
	})
	if err != nil || !created || out.ID != first.ID {
		t.Fatalf("first admitted create = %v, %v, %v", out.ID, created, err)
	}
	equal(t, "admission", seen, store.Admission{Quota: store.Quota{Sandboxes: 2, MemoryMiB: 3072}})
	// A limited resource left unset (the pool's default, which no sum counts) is
	// refused as such.
	unset := mk("k2", 0)
	_, _, err = s.CreateSandboxAdmitted(ctx, t0, unset, admitQuota(unset))
	wantCode(t, err, api.CodeInvalidRequest)

	// Memory: 1024 + 4096 > 3072.
	big := mk("k2", 4096)
	_, _, err = s.CreateSandboxAdmitted(ctx, t0, big, admitQuota(big))
	wantCode(t, err, api.CodeQuotaExceeded)
	if msg := api.AsError(err).Message; msg != "project org1/p would use 5120 of 3072 MiB of memory" {
		t.Fatalf("message %q", msg)
	}
	second := mk("k3", 1024)
	_, created, err = s.CreateSandboxAdmitted(ctx, t0, second, func(a store.Admission, _ *store.Sandbox) error {
		seen = a
		return admitQuota(second)(a, nil)
	})
	if err != nil || !created {
		t.Fatalf("second = %v, %v", created, err)
	}
	equal(t, "usage seen", seen.Usage, store.Usage{Sandboxes: 1, MemoryMiB: 1024})
	equal(t, "queued seen", seen.Queued, 1)
	equal(t, "due seen", seen.Due, 1)
	// A queued sandbox whose next attempt is still to come is queued, not due.
	later := newSandbox("elsewhere")
	later.NextAttemptAt = t0.Add(time.Minute)
	mustCreate(t, s, later)
	_, _, err = s.CreateSandboxAdmitted(ctx, t0, newSandbox("elsewhere"), func(a store.Admission, _ *store.Sandbox) error {
		seen = a
		return errors.New("only looking")
	})
	if err == nil {
		t.Fatal("admit's refusal was not returned")
	}
	equal(t, "queued and due with one backing off", [2]int{seen.Queued, seen.Due}, [2]int{3, 2})

	third := mk("k4", 0)
	_, _, err = s.CreateSandboxAdmitted(ctx, t0, third, admitQuota(third))
	wantCode(t, err, api.CodeQuotaExceeded)
	if msg := api.AsError(err).Message; msg != "project org1/p would use 3 of 2 sandboxes" {
		t.Fatalf("message %q", msg)
	}
	// A retry of an admitted create is answered with its sandbox, never refused.
	again := mk("k1", 1024)
	again.ID = ids.At("sbx", t0)
	out, created, err = s.CreateSandboxAdmitted(ctx, t0, again, func(store.Admission, *store.Sandbox) error {
		return errors.New("admit must not run for a repeated key")
	})
	if err != nil || created || out.ID != first.ID {
		t.Fatalf("repeated key = %v, %v, %v; want %s", out.ID, created, err, first.ID)
	}
	// admit's own error comes back as is, and nothing is written.
	boom := errors.New("boom")
	_, _, err = s.CreateSandboxAdmitted(ctx, t0, newSandbox("q"), func(store.Admission, *store.Sandbox) error { return boom })
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v, want boom", err)
	}
	equal(t, "usage of q", must[store.Usage](t)(s.ProjectUsage(ctx, "org1", "q")), store.Usage{})
	// Ending a sandbox frees its share; lowering the quota applies to the next create.
	must[store.Sandbox](t)(s.UpdateSandbox(ctx, first.ID, t0, func(cur *store.Sandbox) error {
		cur.State = store.StateFailed
		return nil
	}))
	fourth := mk("k5", 1024)
	_, created, err = s.CreateSandboxAdmitted(ctx, t0, fourth, admitQuota(fourth))
	if err != nil || !created {
		t.Fatalf("after a sandbox ended = %v, %v", created, err)
	}

	// admit may change the state of what is inserted: a sandbox meant to start at
	// once is queued instead (the API does so when others wait).
	direct := newSandbox("r")
	direct.State, direct.Pool, direct.ClaimedBy = store.StateProvisioning, "pool-a", "replica-1"
	direct.ClaimExpiresAt = ptr(t0.Add(time.Minute))
	out, created, err = s.CreateSandboxAdmitted(ctx, t0, direct, func(_ store.Admission, sb *store.Sandbox) error {
		sb.State, sb.Pool, sb.ClaimedBy, sb.ClaimExpiresAt = store.StateQueued, "", "", nil
		return nil
	})
	if err != nil || !created {
		t.Fatalf("queued by admit = %v, %v", created, err)
	}
	got := must[store.Sandbox](t)(s.GetSandbox(ctx, direct.ID))
	for _, sb := range []store.Sandbox{out, got} {
		if sb.State != store.StateQueued || sb.Pool != "" || sb.ClaimedBy != "" || sb.ClaimExpiresAt != nil {
			t.Fatalf("stored %+v, want the queued sandbox admit left", sb)
		}
	}
	// And left alone, the state given is the state stored.
	direct = newSandbox("r")
	direct.State, direct.Pool, direct.ClaimedBy = store.StateProvisioning, "pool-a", "replica-1"
	direct.ClaimExpiresAt = ptr(t0.Add(time.Minute))
	out = must[store.Sandbox](t)(first2(s.CreateSandboxAdmitted(ctx, t0, direct, admitQuota(direct))))
	if out.State != store.StateProvisioning || out.Pool != "pool-a" || out.ClaimedBy != "replica-1" || out.ClaimExpiresAt == nil {
		t.Fatalf("stored %+v, want it provisioning on pool-a, claimed", out)
	}
}

// first2 drops the middle result of a (value, bool, error) call.
func first2[T any](v T, _ bool, err error) (T, error) { return v, err }

// Eight creates race for a quota of five sandboxes, through two stores on one
// database (two replicas): exactly five are admitted.
func testSandboxAdmissionConcurrent(t *testing.T, d Driver) {
	ctx := ctxFor(t)
	s := d.New(t)
	other := d.Reopen(t, s)
	must[store.Project](t)(s.PutProject(ctx, t0, store.Project{Org: "org1", Name: "p", Quota: store.Quota{Sandboxes: 5}}))
	var wg sync.WaitGroup
	var mu sync.Mutex
	admitted, refused := 0, 0
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st := s
			if i%2 == 1 {
				st = other
			}
			sb := newSandbox("p")
			_, created, err := st.CreateSandboxAdmitted(ctx, t0, sb, admitQuota(sb))
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil && created:
				admitted++
			case api.IsCode(err, api.CodeQuotaExceeded):
				refused++
			default:
				t.Errorf("create: created=%v err=%v", created, err)
			}
		}()
	}
	wg.Wait()
	if admitted != 5 || refused != 3 {
		t.Fatalf("admitted %d, refused %d; want 5 and 3", admitted, refused)
	}
	equal(t, "usage", must[store.Usage](t)(s.ProjectUsage(ctx, "org1", "p")).Sandboxes, 5)
}

// admit may be called more than once (a driver may first admit on the assumption of
// no quota and an empty queue), but each call sees a fresh copy of the sandbox and
// what is stored is what the call shown the real admission made of it: a create that
// would start at once when nothing is due is queued when something is.
func testSandboxAdmissionDecidesOnce(t *testing.T, d Driver) {
	ctx := ctxFor(t)
	s := d.New(t)
	var last store.Admission
	startUnlessDue := func(a store.Admission, ins *store.Sandbox) error {
		last = a
		ins.Reason += "admitted;"
		if a.Due == 0 {
			ins.State = store.StateProvisioning
		}
		return nil
	}
	first := newSandbox("free")
	out, created, err := s.CreateSandboxAdmitted(ctx, t0, first, startUnlessDue)
	if err != nil || !created || out.State != store.StateProvisioning || out.Reason != "admitted;" {
		t.Fatalf("with an empty queue: %s, %q, created %v, %v; want provisioning, admitted once", out.State, out.Reason, created, err)
	}
	equal(t, "admission with an empty queue", last, store.Admission{})

	mustCreate(t, s, newSandbox("other")) // queued, and due at t0
	second := newSandbox("free")
	second.ID = ids.At("sbx", t0.Add(time.Millisecond))
	out, created, err = s.CreateSandboxAdmitted(ctx, t0, second, startUnlessDue)
	if err != nil || !created || out.State != store.StateQueued || out.Reason != "admitted;" {
		t.Fatalf("with one due: %s, %q, created %v, %v; want queued, admitted once", out.State, out.Reason, created, err)
	}
	equal(t, "admission with one due", last, store.Admission{Queued: 1, Due: 1})
	equal(t, "stored", must[store.Sandbox](t)(s.GetSandbox(ctx, second.ID)), out)
}

// Concurrent retries of one create (one Idempotency-Key) in a project whose quota
// has room for one sandbox: one is created, and every other gets that sandbox back
// rather than a refusal for the room it takes.
func testSandboxAdmissionRetriesUnderQuota(t *testing.T, d Driver) {
	ctx := ctxFor(t)
	s := d.New(t)
	other := d.Reopen(t, s)
	must[store.Project](t)(s.PutProject(ctx, t0, store.Project{Org: "org1", Name: "p", Quota: store.Quota{Sandboxes: 1}}))
	const n = 8
	ids := make([]string, n)
	created := make([]bool, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			st := s
			if i%2 == 1 {
				st = other
			}
			sb := newSandbox("p")
			sb.IdempotencyKey = "retry"
			out, c, err := st.CreateSandboxAdmitted(ctx, t0, sb, admitQuota(sb))
			if err != nil {
				t.Errorf("create %d: %v", i, err)
				return
			}
			ids[i], created[i] = out.ID, c
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	made := 0
	for i := range n {
		if created[i] {
			made++
		}
		if ids[i] != ids[0] {
			t.Fatalf("retries got sandboxes %v, want one sandbox", ids)
		}
	}
	if made != 1 {
		t.Fatalf("%d creates reported created, want 1", made)
	}
}

func testProfiles(t *testing.T, d Driver) {
	ctx := ctxFor(t)
	s := d.New(t)
	_, err := s.GetProfile(ctx, "ci")
	wantCode(t, err, api.CodeNotFound)
	wantCode(t, s.DeleteProfile(ctx, "ci"), api.CodeNotFound)
	in := store.Profile{
		Name:         "ci",
		Capabilities: []string{"exec.stream", "files"},
		Resources:    adapters.Resources{CPU: 2, MemoryMiB: 4096, DiskGiB: 20},
		Template:     "python:3.12",
		Placement:    store.Placement{AllowedPools: []string{"alpha"}, Regions: []string{"eu-west"}},
		TTLSeconds:   3600,
	}
	want := in
	want.CreatedAt, want.UpdatedAt, want.Version = ts(t0), ts(t0), 1
	equal(t, "put", must[store.Profile](t)(s.PutProfile(ctx, t0, in)), want)
	equal(t, "get", must[store.Profile](t)(s.GetProfile(ctx, "ci")), want)

	t1 := t0.Add(time.Hour)
	small := store.Profile{Name: "ci"}
	want = store.Profile{Name: "ci", CreatedAt: ts(t0), UpdatedAt: ts(t1), Version: 2}
	equal(t, "replace", must[store.Profile](t)(s.PutProfile(ctx, t1, small)), want)
	must[store.Profile](t)(s.PutProfile(ctx, t0, store.Profile{Name: "a"}))
	var names []string
	for _, p := range must[[]store.Profile](t)(s.ListProfiles(ctx)) {
		names = append(names, p.Name)
	}
	equal(t, "list", names, []string{"a", "ci"})

	_, err = s.PutProfile(ctx, t0, store.Profile{Name: "bad", TTLSeconds: -1})
	wantCode(t, err, api.CodeInvalidRequest)
	_, err = s.PutProfile(ctx, t0, store.Profile{Name: "bad", Resources: adapters.Resources{CPU: -1}})
	wantCode(t, err, api.CodeInvalidRequest)
	_, err = s.PutProfile(ctx, t0, store.Profile{})
	wantCode(t, err, api.CodeInvalidRequest)

	noErr(t, s.DeleteProfile(ctx, "ci"))
	_, err = s.GetProfile(ctx, "ci")
	wantCode(t, err, api.CodeNotFound)
}
