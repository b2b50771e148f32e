package fake

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/api"
)

var bg = context.Background()

func req(id string) adapters.CreateRequest {
	return adapters.CreateRequest{ID: id, Installation: "inst_a"}
}

func mustCreate(t *testing.T, a *Adapter, r adapters.CreateRequest) adapters.Instance {
	t.Helper()
	inst, err := a.Create(bg, r)
	if err != nil {
		t.Fatalf("Create(%s): %v", r.ID, err)
	}
	return inst
}

func wantCode(t *testing.T, err error, code api.Code) {
	t.Helper()
	if got := api.CodeOf(err); got != code {
		t.Fatalf("got %v (code %q), want %q", err, got, code)
	}
}

func TestCreateIdempotentAndRemembers(t *testing.T) {
	a := New(Config{Region: "lab-1"})
	labels := map[string]string{"team": "x"}
	r := adapters.CreateRequest{ID: "sbx_1", Installation: "inst_a", Template: "python",
		Resources: adapters.Resources{CPU: 2, MemoryMiB: 512, DiskGiB: 5},
		Env:       map[string]string{"A": "1"}, Labels: labels}
	first := mustCreate(t, a, r)
	second := mustCreate(t, a, r)
	if first != second {
		t.Fatalf("second Create = %+v, want %+v", second, first)
	}
	if !strings.HasPrefix(first.Ref, "fake_") || first.SandboxID != "sbx_1" || first.State != adapters.StateRunning || first.Region != "lab-1" {
		t.Errorf("instance = %+v", first)
	}
	if a.Instances() != 1 || a.CreateCalls() != 2 {
		t.Errorf("Instances = %d, CreateCalls = %d", a.Instances(), a.CreateCalls())
	}
	v, err := a.Inspect(first.Ref)
	if err != nil {
		t.Fatal(err)
	}
	wantLabels := map[string]string{"team": "x", adapters.LabelSandboxID: "sbx_1", adapters.LabelInstallation: "inst_a"}
	if v.Installation != "inst_a" || v.Template != "python" || v.Resources != r.Resources ||
		!reflect.DeepEqual(v.Env, r.Env) || !reflect.DeepEqual(v.Labels, wantLabels) {
		t.Errorf("Inspect = %+v", v)
	}
	if len(labels) != 1 {
		t.Errorf("request labels were mutated: %v", labels)
	}
	if got, err := a.Get(bg, first.Ref); err != nil || got != first {
		t.Errorf("Get = %+v, %v", got, err)
	}
}

func TestCreateInvalid(t *testing.T) {
	a := New(Config{Templates: []string{"python"}, MaxCPU: 2, MaxMemoryMiB: 1024, MaxDiskGiB: 10})
	tests := []struct {
		name string
		req  adapters.CreateRequest
	}{
		{"no id", adapters.CreateRequest{Installation: "i"}},
		{"no installation", adapters.CreateRequest{ID: "s"}},
		{"negative resources", adapters.CreateRequest{ID: "s", Installation: "i", Resources: adapters.Resources{CPU: -1}}},
		{"unknown template", adapters.CreateRequest{ID: "s", Installation: "i", Template: "node"}},
		{"cpu over limit", adapters.CreateRequest{ID: "s", Installation: "i", Resources: adapters.Resources{CPU: 3}}},
		{"memory over limit", adapters.CreateRequest{ID: "s", Installation: "i", Resources: adapters.Resources{MemoryMiB: 2048}}},
		{"disk over limit", adapters.CreateRequest{ID: "s", Installation: "i", Resources: adapters.Resources{DiskGiB: 11}}},
		{"missing snapshot", adapters.CreateRequest{ID: "s", Installation: "i", FromSnapshot: "snap_missing"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := a.Create(bg, tt.req)
			wantCode(t, err, api.CodeInvalidRequest)
		})
	}
	if a.Instances() != 0 {
		t.Errorf("%d instances left by invalid requests", a.Instances())
	}
	// Within the limits and naming an accepted template (or none) succeeds.
	mustCreate(t, a, adapters.CreateRequest{ID: "ok1", Installation: "i", Template: "python", Resources: adapters.Resources{CPU: 2, MemoryMiB: 1024, DiskGiB: 10}})
	mustCreate(t, a, adapters.CreateRequest{ID: "ok2", Installation: "i"})
}

func TestCreateErrorsSequence(t *testing.T) {
	codes := []api.Code{api.CodeProviderUnavailable, api.CodeInsufficientCapacity, api.CodeSandboxFailed}
	a := New(Config{CreateErrors: codes})
	for _, code := range codes {
		_, err := a.Create(bg, req("sbx_1"))
		wantCode(t, err, code)
		if a.Instances() != 0 {
			t.Fatalf("an injected failure made an instance")
		}
	}
	mustCreate(t, a, req("sbx_1"))
	if a.CreateCalls() != 4 || a.Instances() != 1 {
		t.Errorf("CreateCalls = %d, Instances = %d", a.CreateCalls(), a.Instances())
	}
}

func TestDropCreateResponses(t *testing.T) {
	a := New(Config{DropCreateResponses: 1})
	_, err := a.Create(bg, req("sbx_1"))
	wantCode(t, err, api.CodeProviderUnavailable)
	list, _ := a.List(bg, "inst_a")
	if len(list) != 1 {
		t.Fatalf("List after a lost response = %+v, want the instance", list)
	}
	retried := mustCreate(t, a, req("sbx_1"))
	if retried != list[0] || a.Instances() != 1 {
		t.Errorf("retry = %+v, want %+v with one instance (have %d)", retried, list[0], a.Instances())
	}
	mustCreate(t, a, req("sbx_2")) // the drop budget is spent
}

func TestCreateConcurrentMakesOneInstance(t *testing.T) {
	release := make(chan struct{})
	a := New(Config{CreateLatency: time.Second, Sleep: func(ctx context.Context, _ time.Duration) error {
		<-release
		return nil
	}})
	const n = 16
	refs := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			inst, err := a.Create(bg, req("sbx_1"))
			if err != nil {
				t.Error(err)
			}
			refs[i] = inst.Ref
		})
	}
	close(release)
	wg.Wait()
	for _, ref := range refs {
		if ref != refs[0] {
			t.Fatalf("refs differ: %v", refs)
		}
	}
	if a.Instances() != 1 {
		t.Errorf("Instances = %d", a.Instances())
	}
}

func TestCreateLatency(t *testing.T) {
	entered := make(chan struct{})
	release := make(chan struct{})
	var got []time.Duration
	a := New(Config{CreateLatency: 250 * time.Millisecond, TotalCPU: 1, Sleep: func(ctx context.Context, d time.Duration) error {
		got = append(got, d)
		entered <- struct{}{}
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}})

	done := make(chan error)
	go func() { _, err := a.Create(bg, req("sbx_1")); done <- err }()
	<-entered
	// While the latency runs, the instance is visible as pending and exec refuses it.
	list, _ := a.List(bg, "inst_a")
	if len(list) != 1 || list[0].State != adapters.StatePending {
		t.Fatalf("List during creation = %+v", list)
	}
	_, err := a.Exec(bg, list[0].Ref, api.ExecRequest{Command: "true"})
	wantCode(t, err, api.CodeInvalidState)
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, []time.Duration{250 * time.Millisecond}) {
		t.Errorf("Sleep called with %v", got)
	}

	// Cancelling aborts the creation and frees its capacity.
	b := New(Config{CreateLatency: time.Minute, TotalCPU: 1, Sleep: a.sleep})
	release = make(chan struct{})
	ctx, cancel := context.WithCancel(bg)
	go func() { _, err := b.Create(ctx, req("sbx_2")); done <- err }()
	<-entered
	cancel()
	err = <-done
	wantCode(t, err, api.CodeProviderUnavailable)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("error %v does not wrap context.Canceled", err)
	}
	if c, _ := b.Capacity(bg); b.Instances() != 0 || c.FreeCPU != 1 {
		t.Errorf("after cancel: %d instances, capacity %+v", b.Instances(), c)
	}
}

func TestDeleteDuringCreate(t *testing.T) {
	entered := make(chan struct{})
	release := make(chan struct{})
	a := New(Config{CreateLatency: time.Second, Sleep: func(context.Context, time.Duration) error {
		close(entered)
		<-release
		return nil
	}})
	done := make(chan error)
	go func() { _, err := a.Create(bg, req("sbx_1")); done <- err }()
	<-entered
	list, _ := a.List(bg, "inst_a")
	if err := a.Delete(bg, list[0].Ref); err != nil {
		t.Fatal(err)
	}
	close(release)
	wantCode(t, <-done, api.CodeSandboxFailed)
	if a.Instances() != 0 {
		t.Errorf("Instances = %d", a.Instances())
	}
}

func TestDefaultSleepHonoursContext(t *testing.T) {
	ctx, cancel := context.WithCancel(bg)
	cancel()
	if err := timerSleep(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Errorf("timerSleep on a cancelled context = %v", err)
	}
	if err := timerSleep(bg, 0); err != nil {
		t.Errorf("timerSleep(0) = %v", err)
	}
}

func TestBoundedCapacity(t *testing.T) {
	a := New(Config{TotalCPU: 3, TotalMemoryMiB: 3072})
	big := adapters.CreateRequest{ID: "big", Installation: "i", Resources: adapters.Resources{CPU: 2, MemoryMiB: 1024}}
	first := mustCreate(t, a, big)
	c, _ := a.Capacity(bg)
	if want := (adapters.Capacity{Bounded: true, FreeCPU: 1, FreeMemoryMiB: 2048, LargestFreeCPU: 1, LargestFreeMemoryMiB: 2048}); c != want {
		t.Errorf("Capacity = %+v, want %+v", c, want)
	}
	// A default-sized request is charged 1 CPU and 1024 MiB.
	def := mustCreate(t, a, adapters.CreateRequest{ID: "def", Installation: "i"})
	_, err := a.Create(bg, adapters.CreateRequest{ID: "more", Installation: "i", Resources: adapters.Resources{CPU: 0.5}})
	wantCode(t, err, api.CodeInsufficientCapacity)
	// Stopped instances keep holding their share.
	if err := a.Stop(bg, def.Ref); err != nil {
		t.Fatal(err)
	}
	_, err = a.Create(bg, adapters.CreateRequest{ID: "more", Installation: "i", Resources: adapters.Resources{CPU: 0.5}})
	wantCode(t, err, api.CodeInsufficientCapacity)
	if err := a.Delete(bg, first.Ref); err != nil {
		t.Fatal(err)
	}
	mustCreate(t, a, big)

	// Memory alone bounds; CPU is then reported as never binding.
	m := New(Config{TotalMemoryMiB: 1024})
	mustCreate(t, m, adapters.CreateRequest{ID: "a", Installation: "i", Resources: adapters.Resources{CPU: 64, MemoryMiB: 512}})
	c, _ = m.Capacity(bg)
	if !c.Bounded || c.FreeMemoryMiB != 512 || !c.Fits(adapters.Resources{CPU: 1000, MemoryMiB: 512}) || c.Fits(adapters.Resources{MemoryMiB: 513}) {
		t.Errorf("memory-bounded Capacity = %+v", c)
	}
}

func TestListHealthDelete(t *testing.T) {
	a := New(Config{})
	var refs []string
	for _, id := range []string{"s1", "s2", "s3"} {
		refs = append(refs, mustCreate(t, a, req(id)).Ref)
	}
	other := mustCreate(t, a, adapters.CreateRequest{ID: "s4", Installation: "inst_b"})
	// ULIDs made in the same millisecond are random, so creation order is not ref order.
	slices.Sort(refs)
	list, err := a.List(bg, "inst_a")
	if err != nil || len(list) != 3 {
		t.Fatalf("List = %+v, %v", list, err)
	}
	for i, inst := range list {
		if inst.Ref != refs[i] || inst.SandboxID == "" {
			t.Errorf("List[%d] = %+v, want ref %s (sorted by ref)", i, inst, refs[i])
		}
	}
	if l, _ := a.List(bg, "nobody"); l == nil || len(l) != 0 {
		t.Errorf("List of an unknown installation = %#v, want empty", l)
	}

	a.SetListError(true)
	_, err = a.List(bg, "inst_a")
	wantCode(t, err, api.CodeProviderUnavailable)
	a.SetHealthError(true)
	wantCode(t, a.Health(bg), api.CodeProviderUnavailable)
	a.SetHealthError(false)
	if err := a.Health(bg); err != nil {
		t.Error(err)
	}

	for range 2 {
		if err := a.Delete(bg, other.Ref); err != nil {
			t.Fatalf("Delete: %v", err)
		}
	}
	_, err = a.Get(bg, other.Ref)
	wantCode(t, err, api.CodeNotFound)
	// The sandbox ID is free again after delete: a new Create makes a new instance.
	if again := mustCreate(t, a, adapters.CreateRequest{ID: "s4", Installation: "inst_b"}); again.Ref == other.Ref {
		t.Error("Create after Delete returned the deleted ref")
	}
}

func TestSetState(t *testing.T) {
	a := New(Config{})
	inst := mustCreate(t, a, req("s"))
	if err := a.SetState(inst.Ref, adapters.StateError, "oom"); err != nil {
		t.Fatal(err)
	}
	if got, _ := a.Get(bg, inst.Ref); got.State != adapters.StateError || got.Message != "oom" {
		t.Errorf("Get = %+v", got)
	}
	wantCode(t, a.SetState(inst.Ref, "exploded", ""), api.CodeInvalidRequest)
	wantCode(t, a.SetState("fake_missing", adapters.StateRunning, ""), api.CodeNotFound)
	// A created instance forced back to pending is still returned, not waited on.
	if err := a.SetState(inst.Ref, adapters.StatePending, ""); err != nil {
		t.Fatal(err)
	}
	if again := mustCreate(t, a, req("s")); again.Ref != inst.Ref {
		t.Errorf("Create = %+v", again)
	}
}

func TestRenewTTL(t *testing.T) {
	a := New(Config{})
	r := req("sbx_1")
	r.TTLSeconds = 60
	inst := mustCreate(t, a, r)
	if v, _ := a.Inspect(inst.Ref); v.TTLSeconds != 60 || v.TTLRenewals != 0 {
		t.Fatalf("after Create: ttl %d, renewals %d", v.TTLSeconds, v.TTLRenewals)
	}
	if err := a.RenewTTL(bg, inst.Ref, 3600); err != nil {
		t.Fatal(err)
	}
	// A stopped instance keeps its expiry too.
	if err := a.Stop(bg, inst.Ref); err != nil {
		t.Fatal(err)
	}
	if err := a.RenewTTL(bg, inst.Ref, 0); err != nil {
		t.Fatal(err)
	}
	if v, _ := a.Inspect(inst.Ref); v.TTLSeconds != 0 || v.TTLRenewals != 2 {
		t.Fatalf("after renewals: ttl %d, renewals %d", v.TTLSeconds, v.TTLRenewals)
	}
	wantCode(t, a.RenewTTL(bg, "fake_missing", 60), api.CodeNotFound)
	wantCode(t, a.RenewTTL(bg, inst.Ref, -1), api.CodeInvalidRequest)
}
