package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/different-ai/differently/internal/ids"
	"github.com/different-ai/differently/internal/pgtest"
	"github.com/different-ai/differently/server/store"
	"github.com/different-ai/differently/server/store/postgres"
)

// BenchmarkLifecycle times the writes of one sandbox lifecycle (an admitted create,
// then running, terminating and terminated), with and without the events
// server/lifecycle records for them, so that the cost of appending events shows.
func BenchmarkLifecycle(b *testing.B) {
	for _, withEvents := range []bool{false, true} {
		name := "without-events"
		if withEvents {
			name = "with-events"
		}
		b.Run(name, func(b *testing.B) {
			s, err := postgres.Open(context.Background(), pgtest.SchemaURL(b))
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			b.SetParallelism(16)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := lifecycle(b.Context(), s, withEvents); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

func lifecycle(ctx context.Context, s store.Store, withEvents bool) error {
	record := func(sb *store.Sandbox, typ store.EventType, from, to store.State) {
		if withEvents {
			sb.Pending = append(sb.Pending, store.Event{Type: typ, From: from, To: to, Actor: "scheduler:bench", Pool: "fake"})
		}
	}
	in := store.Sandbox{ID: ids.New("sbx"), Org: "default", Project: "default",
		State: store.StateProvisioning, Pool: "fake", Region: "local", ClaimedBy: "bench"}
	record(&in, store.EventCreated, "", store.StateQueued)
	record(&in, store.EventPlaced, store.StateQueued, store.StateProvisioning)
	sb, _, err := s.CreateSandboxAdmitted(ctx, time.Now(), in, func(store.Admission, *store.Sandbox) error { return nil })
	if err != nil {
		return err
	}
	for _, to := range []store.State{store.StateRunning, store.StateTerminating, store.StateTerminated} {
		_, err := s.UpdateSandbox(ctx, sb.ID, time.Now(), func(cur *store.Sandbox) error {
			record(cur, store.EventType(to), cur.State, to)
			cur.State = to
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}
