package postgres

import (
	"context"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/different-ai/differently/server/store"
)

// Reconnection backoff of Watch: a database restart should not be hammered, and a
// replica should hear changes again within seconds of the database coming back.
const (
	watchRetryMin = 100 * time.Millisecond
	watchRetryMax = 5 * time.Second
)

// Watch implements store.Watcher with LISTEN on a connection of its own, outside the
// pool: a pooled connection would keep listening after being handed to someone else.
// Every replica's notifier announces its sandbox changes (notify.go); triggers
// announce token deletions and policy writes (migration 003). After every (re)connection,
// fn gets a ChangeResync, since changes committed while nobody listened are lost.
func (s *Store) Watch(ctx context.Context, fn func(store.Change)) error {
	delay := watchRetryMin
	for {
		listened, err := s.listen(ctx, fn)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if listened {
			delay = watchRetryMin
		}
		fn(store.Change{Kind: store.ChangeResync, Err: err})
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		delay = min(delay*2, watchRetryMax)
	}
}

// listen runs one LISTEN session until it fails or ctx ends; listened says whether
// it got as far as listening.
func (s *Store) listen(ctx context.Context, fn func(store.Change)) (listened bool, err error) {
	conn, err := pgx.ConnectConfig(ctx, s.pool.Config().ConnConfig.Copy())
	if err != nil {
		return false, wrap(err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{s.channel}.Sanitize()); err != nil {
		return false, wrap(err)
	}
	fn(store.Change{Kind: store.ChangeResync})
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return true, wrap(err)
		}
		for line := range strings.SplitSeq(n.Payload, "\n") {
			if c, ok := parseChange(line); ok {
				fn(c)
			}
		}
	}
}

// parseChange reads one line of a payload: a notifier's line or a trigger's payload.
func parseChange(payload string) (store.Change, bool) {
	f := strings.Fields(payload)
	switch {
	case (len(f) == 3 || len(f) == 4 && f[3] == "c") && f[0] == "s":
		return store.Change{Kind: store.ChangeSandbox, ID: f[1], State: store.State(f[2]), Claimed: len(f) == 4}, true
	case len(f) == 2 && f[0] == "t":
		return store.Change{Kind: store.ChangeToken, ID: f[1]}, true
	case len(f) == 1 && f[0] == "p":
		return store.Change{Kind: store.ChangePolicy}, true
	}
	return store.Change{}, false
}
