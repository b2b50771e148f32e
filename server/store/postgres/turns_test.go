package postgres_test

import (
	"sync"
	"testing"
)

// sharedRound runs lead alone and holds its round trip until every one of calls has
// queued behind it, so that they share the round trips after it; hook installs the
// queue's test hooks (Store.HookCreates, Store.HookReads). It returns the sizes of
// the batches sent, lead's first.
func sharedRound(t *testing.T, hook func(queued, sent func(n int)), lead func(), calls []func()) []int {
	t.Helper()
	var mu sync.Mutex
	var sizes []int
	entered, release, all := make(chan struct{}), make(chan struct{}), make(chan struct{})
	hook(func(n int) {
		if n == len(calls) {
			close(all)
		}
	}, func(n int) {
		mu.Lock()
		sizes = append(sizes, n)
		first := len(sizes) == 1
		mu.Unlock()
		if first {
			close(entered)
			<-release
		}
	})
	defer hook(nil, nil)
	var wg sync.WaitGroup
	wg.Go(lead)
	<-entered
	for _, call := range calls {
		wg.Go(call)
	}
	<-all
	close(release)
	wg.Wait()
	return sizes
}
