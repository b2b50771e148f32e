package store_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/internal/ids"
	"github.com/different-ai/differently/server/store"
	"github.com/different-ai/differently/server/store/sqlite"
)

var t0 = time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)

// gatedStore holds every UpdateSandboxes until the test lets it go, and records the
// size of each batch.
type gatedStore struct {
	store.Store
	entered chan int
	gate    chan struct{}
}

func (g *gatedStore) UpdateSandboxes(ctx context.Context, ids []string, now time.Time, fn func(int, *store.Sandbox) error) ([]store.Sandbox, []error, error) {
	g.entered <- len(ids)
	<-g.gate
	return g.Store.UpdateSandboxes(ctx, ids, now, fn)
}

// UpdateKnownSandboxes reports a batch of known rows as a negative size, and then
// behaves as a store whose known rows all turned out stale: fn runs on each known
// value first, and again on the stored one.
func (g *gatedStore) UpdateKnownSandboxes(ctx context.Context, known []store.Sandbox, now time.Time, fn func(int, *store.Sandbox) error) ([]store.Sandbox, []error, error) {
	g.entered <- -len(known)
	<-g.gate
	for i, sb := range known {
		_ = fn(i, &sb)
	}
	return g.Store.UpdateKnownSandboxes(ctx, known, now, fn)
}

// A transaction made only of writes of known rows goes through
// UpdateKnownSandboxes, one with any other write through UpdateSandboxes; a callback
// run twice counts by its last run, and a panic of its first run is forgotten.
func TestBatcherKnownWrites(t *testing.T) {
	ctx := context.Background()
	st, list := newSandboxes(t, 3)
	rows := make([]store.Sandbox, len(list))
	for i, id := range list {
		var err error
		if rows[i], err = st.GetSandbox(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	g := &gatedStore{Store: st, entered: make(chan int, 8), gate: make(chan struct{})}
	b := store.NewBatcher(g, func() time.Time { return t0 })
	incr := func(sb *store.Sandbox) error { sb.Attempts++; return nil }
	results := make([]store.Sandbox, 5)
	errs := make([]error, 5)
	var wg sync.WaitGroup
	known := func(i int, row store.Sandbox, fn func(*store.Sandbox) error) {
		wg.Go(func() { results[i], errs[i] = b.UpdateKnownSandbox(ctx, row, fn) })
	}
	step := func(want int) {
		t.Helper()
		if n := <-g.entered; n != want {
			t.Fatalf("transaction of %d writes (negative: known rows), want %d", n, want)
		}
		g.gate <- struct{}{}
	}

	wg.Go(func() { results[0], errs[0] = b.UpdateSandbox(ctx, list[2], incr) })
	if n := <-g.entered; n != 1 {
		t.Fatalf("first transaction holds %d writes, want 1", n)
	}
	runs := 0
	known(1, rows[0], func(sb *store.Sandbox) error {
		if runs++; runs == 1 {
			panic("the stale value's run")
		}
		return incr(sb)
	})
	known(2, rows[1], incr)
	waitPending(t, b, 2)
	g.gate <- struct{}{}
	step(-2)
	wg.Wait()
	for i, want := range []int{1, 1, 1} {
		if errs[i] != nil || results[i].Attempts != want {
			t.Fatalf("write %d: attempts %d, %v; want %d", i, results[i].Attempts, errs[i], want)
		}
	}
	if runs != 2 {
		t.Fatalf("the panicking callback ran %d times, want 2", runs)
	}

	// A known write leads alone; a known and an unknown write then share a
	// transaction that reads its rows.
	known(3, results[1], incr)
	if n := <-g.entered; n != -1 {
		t.Fatalf("a lone known write went into a transaction of %d, want -1", n)
	}
	known(4, results[2], incr)
	wg.Go(func() { _, _ = b.UpdateSandbox(ctx, list[2], incr) })
	waitPending(t, b, 2)
	g.gate <- struct{}{}
	step(2)
	wg.Wait()
	if errs[3] != nil || errs[4] != nil || results[3].Attempts != 2 || results[4].Attempts != 2 {
		t.Fatalf("writes 3 and 4: %+v, %v", results[3:], errs[3:])
	}
	assertIdle(t, b)
}

// A held row whose callback panicked on its held value, and whose stored row is
// gone, is answered as gone: the panic was not on the row the store has.
func TestBatcherKnownWriteOfAGoneRow(t *testing.T) {
	ctx := context.Background()
	st, _ := newSandboxes(t, 0)
	g := &gatedStore{Store: st, entered: make(chan int, 8), gate: make(chan struct{})}
	b := store.NewBatcher(g, func() time.Time { return t0 })
	done := make(chan error, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				done <- fmt.Errorf("panicked: %v", p)
			}
		}()
		_, err := b.UpdateKnownSandbox(ctx, store.Sandbox{ID: "sbx_gone", Version: 3}, func(*store.Sandbox) error {
			panic("on the held value")
		})
		done <- err
	}()
	if n := <-g.entered; n != -1 {
		t.Fatalf("transaction of %d, want a lone known write", n)
	}
	g.gate <- struct{}{}
	if err := <-done; !api.IsCode(err, api.CodeNotFound) {
		t.Fatalf("UpdateKnownSandbox of a gone row: %v, want not_found", err)
	}
	assertIdle(t, b)
}

// Writes made while a transaction is in progress share the next one; each gets its
// own result and error, and two writes of one sandbox are both applied, one per
// transaction.
func TestBatcherGroupsConcurrentWrites(t *testing.T) {
	ctx := context.Background()
	st, list := newSandboxes(t, 4)
	g := &gatedStore{Store: st, entered: make(chan int, 8), gate: make(chan struct{})}
	b := store.NewBatcher(g, func() time.Time { return t0 })
	refused := errors.New("refused")

	type res struct {
		sb  store.Sandbox
		err error
	}
	results := make([]res, 5)
	var wg sync.WaitGroup
	write := func(i int, id string, fn func(*store.Sandbox) error) {
		wg.Go(func() {
			sb, err := b.UpdateSandbox(ctx, id, fn)
			results[i] = res{sb, err}
		})
	}
	incr := func(sb *store.Sandbox) error { sb.Attempts++; return nil }
	// The first write leads a transaction of its own and is held there.
	write(0, list[0], incr)
	if n := <-g.entered; n != 1 {
		t.Fatalf("first transaction holds %d writes, want 1", n)
	}
	// Four more queue meanwhile: one refused, one for the sandbox already in flight.
	write(1, list[1], incr)
	write(2, list[2], func(*store.Sandbox) error { return refused })
	write(3, list[3], incr)
	write(4, list[0], incr)
	waitPending(t, b, 4)
	g.gate <- struct{}{}
	if n := <-g.entered; n != 4 {
		t.Fatalf("second transaction holds %d writes, want the 4 that queued", n)
	}
	g.gate <- struct{}{}
	wg.Wait()

	for i, want := range []int{1, 1, 0, 1, 2} {
		r := results[i]
		if i == 2 {
			if !errors.Is(r.err, refused) {
				t.Fatalf("write 2: %v, want its own error", r.err)
			}
			continue
		}
		if r.err != nil || r.sb.Attempts != want {
			t.Fatalf("write %d: attempts %d, %v; want %d", i, r.sb.Attempts, r.err, want)
		}
	}
	assertIdle(t, b)
}

func assertIdle(t *testing.T, b *store.Batcher) {
	t.Helper()
	if busy, pending := store.BatcherState(b); busy || pending != 0 {
		t.Fatalf("batcher left busy=%v with %d pending", busy, pending)
	}
}

// newSandboxes opens a SQLite store holding n new sandboxes and returns their IDs.
func newSandboxes(t *testing.T, n int) (store.Store, []string) {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "db.sqlite"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	var list []string
	for range n {
		sb, _, err := st.CreateSandbox(ctx, t0, store.Sandbox{ID: ids.New("sbx"), Org: "o", Project: "p"})
		if err != nil {
			t.Fatal(err)
		}
		list = append(list, sb.ID)
	}
	return st, list
}

// waitPending waits until n writes are queued behind the transaction in progress.
// The writers are goroutines of this test that only append under the batcher's
// lock, so this spins on that state for a moment, bounded by the test deadline.
func waitPending(t *testing.T, b *store.Batcher, n int) {
	t.Helper()
	for {
		_, got := store.BatcherState(b)
		if got == n {
			return
		}
		if t.Context().Err() != nil {
			t.Fatalf("%d writes pending, want %d", got, n)
		}
		runtime.Gosched()
	}
}

// A write whose callback panics fails alone: the writes sharing its transaction
// commit, the panic is raised again on the goroutine of the write's caller (whose
// recoverer may keep the replica serving), and later writes go through.
func TestBatcherSurvivesPanickingWrite(t *testing.T) {
	ctx := context.Background()
	st, list := newSandboxes(t, 2)
	g := &gatedStore{Store: st, entered: make(chan int, 8), gate: make(chan struct{})}
	b := store.NewBatcher(g, func() time.Time { return t0 })
	incr := func(sb *store.Sandbox) error { sb.Attempts++; return nil }

	var wg sync.WaitGroup
	wg.Go(func() { _, _ = b.UpdateSandbox(ctx, list[0], incr) })
	<-g.entered // the first transaction is in progress; the next two share one
	var recovered any
	wg.Go(func() {
		defer func() { recovered = recover() }()
		_, _ = b.UpdateSandbox(ctx, list[0], func(sb *store.Sandbox) error {
			sb.Attempts = 99
			panic("boom")
		})
	})
	waitPending(t, b, 1)
	var shared store.Sandbox
	var sharedErr error
	wg.Go(func() { shared, sharedErr = b.UpdateSandbox(ctx, list[1], incr) })
	waitPending(t, b, 2)
	g.gate <- struct{}{}
	if n := <-g.entered; n != 2 {
		t.Fatalf("second transaction holds %d writes, want 2", n)
	}
	g.gate <- struct{}{}
	wg.Wait()
	if recovered != "boom" {
		t.Fatalf("the writer recovered %v, want its callback's panic", recovered)
	}
	if sharedErr != nil || shared.Attempts != 1 {
		t.Fatalf("the write sharing the transaction: %d attempts, %v; want it committed", shared.Attempts, sharedErr)
	}
	if sb, err := st.GetSandbox(ctx, list[0]); err != nil || sb.Attempts != 1 {
		t.Fatalf("the panicking write's sandbox: %d attempts, %v; want only the first write's 1", sb.Attempts, err)
	}
	assertIdle(t, b)

	done := make(chan error, 1)
	go func() {
		_, err := b.UpdateSandbox(ctx, list[1], incr)
		done <- err
	}()
	<-g.entered
	g.gate <- struct{}{}
	if err := <-done; err != nil {
		t.Fatalf("a write after the panic: %v", err)
	}
	assertIdle(t, b)
}

// panickyStore panics inside UpdateSandboxes once, as a driver bug would.
type panickyStore struct {
	store.Store
	entered chan int
	gate    chan bool // true: panic
}

func (p *panickyStore) UpdateSandboxes(ctx context.Context, ids []string, now time.Time, fn func(int, *store.Sandbox) error) ([]store.Sandbox, []error, error) {
	p.entered <- len(ids)
	if <-p.gate {
		panic("driver bug")
	}
	return p.Store.UpdateSandboxes(ctx, ids, now, fn)
}

// A panic of the store itself fails its whole transaction: the first write's caller
// raises it, the others get an internal error, and the Batcher goes on.
func TestBatcherSurvivesPanickingStore(t *testing.T) {
	ctx := context.Background()
	st, list := newSandboxes(t, 3)
	p := &panickyStore{Store: st, entered: make(chan int, 8), gate: make(chan bool)}
	b := store.NewBatcher(p, func() time.Time { return t0 })
	incr := func(sb *store.Sandbox) error { sb.Attempts++; return nil }

	var wg sync.WaitGroup
	wg.Go(func() { _, _ = b.UpdateSandbox(ctx, list[0], incr) })
	<-p.entered
	errs := make([]error, 2)
	var recovered [2]any
	for i := range 2 {
		wg.Go(func() {
			defer func() { recovered[i] = recover() }()
			_, errs[i] = b.UpdateSandbox(ctx, list[1+i], incr)
		})
		waitPending(t, b, i+1)
	}
	p.gate <- false
	if n := <-p.entered; n != 2 {
		t.Fatalf("second transaction holds %d writes, want 2", n)
	}
	p.gate <- true
	wg.Wait()
	panics, internal := 0, 0
	for i := range 2 {
		switch {
		case recovered[i] == "driver bug":
			panics++
		case api.CodeOf(errs[i]) == api.CodeInternal:
			internal++
		}
	}
	if panics != 1 || internal != 1 {
		t.Fatalf("panics %v, errors %v; want the first write's caller to panic and the other to fail", recovered, errs)
	}
	assertIdle(t, b)
	go func() { p.gate <- false }()
	if _, err := b.UpdateSandbox(ctx, list[1], incr); err != nil {
		t.Fatalf("a write after the store's panic: %v", err)
	}
	<-p.entered
}

// goneStore answers every write as if its sandbox had been deleted, once gone is set.
type goneStore struct {
	store.Store
	gone *atomic.Bool
}

func (g goneStore) UpdateSandboxes(ctx context.Context, ids []string, now time.Time, fn func(int, *store.Sandbox) error) ([]store.Sandbox, []error, error) {
	if !g.gone.Load() {
		return g.Store.UpdateSandboxes(ctx, ids, now, fn)
	}
	errs := make([]error, len(ids))
	for i, id := range ids {
		errs[i] = api.Errorf(api.CodeNotFound, "sandbox %s not found", id)
	}
	return make([]store.Sandbox, len(ids)), errs, nil
}

func (g goneStore) UpdateKnownSandboxes(ctx context.Context, known []store.Sandbox, now time.Time, fn func(int, *store.Sandbox) error) ([]store.Sandbox, []error, error) {
	return g.UpdateSandboxes(ctx, store.SandboxIDs(known), now, fn)
}

// A repeatable write starts from the row the Batcher's last write of that sandbox
// returned, so that a transaction of such writes goes through UpdateKnownSandboxes;
// a write made elsewhere meanwhile is not lost, a plain UpdateSandbox never starts
// from a held row, and terminal, gone and surplus rows are not held.
func TestBatcherHeldRows(t *testing.T) {
	ctx := context.Background()
	st, list := newSandboxes(t, 4)
	g := &gatedStore{Store: st, entered: make(chan int, 8), gate: make(chan struct{})}
	b := store.NewBatcher(g, func() time.Time { return t0 })
	incr := func(sb *store.Sandbox) error { sb.Attempts++; return nil }
	write := func(want int, update func(context.Context, string, func(*store.Sandbox) error) (store.Sandbox, error),
		id string, fn func(*store.Sandbox) error) store.Sandbox {
		t.Helper()
		done := make(chan store.Sandbox, 1)
		go func() {
			sb, err := update(ctx, id, fn)
			if err != nil {
				t.Errorf("write of %s: %v", id, err)
			}
			done <- sb
		}()
		if n := <-g.entered; n != want {
			t.Fatalf("transaction of %d writes (negative: known rows), want %d", n, want)
		}
		g.gate <- struct{}{}
		return <-done
	}
	held := func(want ...string) {
		t.Helper()
		slices.Sort(want)
		if got := store.HeldRows(b, 0); !slices.Equal(got, want) {
			t.Fatalf("held rows %v, want %v", got, want)
		}
	}

	write(1, b.UpdateSandboxRepeatable, list[0], incr)
	held(list[0])
	if sb := write(-1, b.UpdateSandboxRepeatable, list[0], incr); sb.Attempts != 2 {
		t.Fatalf("attempts %d after two writes, want 2", sb.Attempts)
	}
	// A write that did not go through the Batcher makes the held row stale; the
	// store then writes on the stored row (the gated store always does).
	if _, err := st.UpdateSandbox(ctx, list[0], t0, incr); err != nil {
		t.Fatal(err)
	}
	if sb := write(-1, b.UpdateSandboxRepeatable, list[0], incr); sb.Attempts != 4 {
		t.Fatalf("attempts %d after a write made elsewhere, want 4", sb.Attempts)
	}
	// A callback that may not run twice reads the row; its result is held all the same.
	write(1, b.UpdateSandbox, list[1], incr)
	write(1, b.UpdateSandbox, list[1], incr)
	held(list[0], list[1])
	// A writer's own known row gives way to a newer held one.
	stale, err := st.GetSandbox(ctx, list[1])
	if err != nil {
		t.Fatal(err)
	}
	stale.Version--
	runs := 0
	done := make(chan error, 1)
	go func() {
		_, err := b.UpdateKnownSandbox(ctx, stale, func(sb *store.Sandbox) error {
			if runs++; runs == 1 && sb.Version != stale.Version+1 {
				return fmt.Errorf("first run on version %d, want the held %d", sb.Version, stale.Version+1)
			}
			return nil
		})
		done <- err
	}()
	if n := <-g.entered; n != -1 {
		t.Fatalf("transaction of %d writes, want -1", n)
	}
	g.gate <- struct{}{}
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	// Terminal rows are forgotten.
	write(1, b.UpdateSandboxRepeatable, list[2], func(sb *store.Sandbox) error {
		sb.State = store.StateTerminated
		return nil
	})
	held(list[0], list[1])
	write(-1, b.UpdateSandboxRepeatable, list[1], func(sb *store.Sandbox) error {
		sb.State = store.StateFailed
		return nil
	})
	held(list[0])

	// So are rows a write did not change: the write's callback saw something the
	// held row may not show.
	refused := make(chan error, 1)
	go func() {
		_, err := b.UpdateSandboxRepeatable(ctx, list[0], func(*store.Sandbox) error { return errors.New("no") })
		refused <- err
	}()
	if n := <-g.entered; n != -1 {
		t.Fatalf("transaction of %d writes, want -1", n)
	}
	g.gate <- struct{}{}
	if err := <-refused; err == nil {
		t.Fatal("a refused write succeeded")
	}
	held()

	// Rows beyond the limit push others out.
	store.HeldRows(b, 1)
	write(1, b.UpdateSandboxRepeatable, list[3], incr)
	held(list[3])

	// A row found gone is forgotten.
	var isGone atomic.Bool
	gb := store.NewBatcher(goneStore{Store: st, gone: &isGone}, func() time.Time { return t0 })
	if _, err := gb.UpdateSandboxRepeatable(ctx, list[0], incr); err != nil {
		t.Fatal(err)
	}
	if got := store.HeldRows(gb, 0); len(got) != 1 {
		t.Fatalf("held rows %v, want %s", got, list[0])
	}
	isGone.Store(true)
	if _, err := gb.UpdateSandboxRepeatable(ctx, list[0], incr); !api.IsCode(err, api.CodeNotFound) {
		t.Fatalf("write of a gone row: %v, want not_found", err)
	}
	if got := store.HeldRows(gb, 0); len(got) != 0 {
		t.Fatalf("held rows %v after the row was found gone, want none", got)
	}
	assertIdle(t, b)
}
