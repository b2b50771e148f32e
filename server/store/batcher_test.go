package store_test

import (
	"context"
	"errors"
	"path/filepath"
	"runtime"
	"sync"
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

// Writes made while a transaction is in progress share the next one; each gets its
// own result and error, and two writes of one sandbox are both applied, one per
// transaction.
func TestBatcherGroupsConcurrentWrites(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "db.sqlite"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	var list []string
	for range 4 {
		sb, _, err := st.CreateSandbox(ctx, t0, store.Sandbox{ID: ids.New("sbx"), Org: "o", Project: "p"})
		if err != nil {
			t.Fatal(err)
		}
		list = append(list, sb.ID)
	}
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

// A write whose callback panics fails its transaction but not the Batcher: the
// panic reaches the caller that led the transaction (whose recoverer may keep the
// replica serving), a write sharing the transaction fails with an internal error
// instead of waiting forever, and later writes go through.
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
		_, _ = b.UpdateSandbox(ctx, list[0], func(*store.Sandbox) error { panic("boom") })
	})
	waitPending(t, b, 1)
	var sharedErr error
	wg.Go(func() { _, sharedErr = b.UpdateSandbox(ctx, list[1], incr) })
	waitPending(t, b, 2)
	g.gate <- struct{}{}
	if n := <-g.entered; n != 2 {
		t.Fatalf("second transaction holds %d writes, want 2", n)
	}
	g.gate <- struct{}{}
	wg.Wait()
	if recovered != "boom" {
		t.Fatalf("the leader recovered %v, want the callback's panic", recovered)
	}
	if api.CodeOf(sharedErr) != api.CodeInternal {
		t.Fatalf("the write sharing the transaction: %v, want an internal error", sharedErr)
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
	sb, err := st.GetSandbox(ctx, list[1])
	if err != nil || sb.Attempts != 1 {
		t.Fatalf("sandbox after the panic: %d attempts, %v; want only the last write's 1", sb.Attempts, err)
	}
	assertIdle(t, b)
}
