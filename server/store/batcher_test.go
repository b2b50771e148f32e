package store_test

import (
	"context"
	"errors"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

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
	if busy, pending := store.BatcherState(b); busy || pending != 0 {
		t.Fatalf("batcher left busy=%v with %d pending", busy, pending)
	}
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
