package postgres_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/internal/pgtest"
	"github.com/different-ai/differently/server/store"
)

// TestCreatesShareATransaction: creates that queue behind one in progress are
// written together, and each gets the answer it would have got alone: a repeated
// idempotency key inside one batch returns the first create's sandbox, and an
// insert the server refuses (an ID that exists) fails alone while the others of its
// batch are written.
func TestCreatesShareATransaction(t *testing.T) {
	s := open(t, pgtest.SchemaURL(t))
	ctx := t.Context()
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	n := 0
	sandbox := func(key string) store.Sandbox {
		n++
		return store.Sandbox{ID: fmt.Sprintf("sbx_%03d", n), Org: "org1", Project: "proj1",
			State: store.StateProvisioning, Pool: "alpha", IdempotencyKey: key,
			Pending: []store.Event{{Type: store.EventCreated, To: store.StateProvisioning, Pool: "alpha"}}}
	}
	taken := sandbox("")
	if _, _, err := s.CreateSandboxAdmitted(ctx, t0, taken, nil); err != nil {
		t.Fatal(err)
	}

	type result struct {
		out     store.Sandbox
		created bool
		err     error
	}
	// round creates lead alone and holds its round trip until every one of batch has
	// queued behind it, so that they share the next one.
	round := func(t *testing.T, batch []store.Sandbox) (sizes []int, results []result) {
		results = make([]result, len(batch))
		calls := make([]func(), len(batch))
		for i, sb := range batch {
			calls[i] = func() {
				r := &results[i]
				r.out, r.created, r.err = s.CreateSandboxAdmitted(ctx, t0, sb, nil)
			}
		}
		sizes = sharedRound(t, s.HookCreates, func() {
			if _, _, err := s.CreateSandboxAdmitted(ctx, t0, sandbox(""), nil); err != nil {
				t.Error(err)
			}
		}, calls)
		return sizes, results
	}

	t.Run("one key twice", func(t *testing.T) {
		batch := []store.Sandbox{sandbox(""), sandbox("k1"), sandbox("k1"), sandbox("")}
		sizes, rs := round(t, batch)
		if fmt.Sprint(sizes) != "[1 4]" {
			t.Fatalf("batch sizes %v, want [1 4]", sizes)
		}
		for i, r := range rs {
			if r.err != nil {
				t.Fatalf("create %d: %v", i, r.err)
			}
		}
		if !rs[0].created || !rs[3].created {
			t.Fatalf("created %v %v, want both", rs[0].created, rs[3].created)
		}
		// The two creates with one key queue in either order: one makes the sandbox,
		// the other gets it back.
		won, lost := 1, 2
		if rs[2].created {
			won, lost = 2, 1
		}
		if !rs[won].created || rs[lost].created || rs[lost].out.ID != batch[won].ID {
			t.Fatalf("the repeated key: created %v and %v, IDs %s and %s; want one sandbox, %s, for both",
				rs[1].created, rs[2].created, rs[1].out.ID, rs[2].out.ID, batch[won].ID)
		}
		for _, i := range []int{0, won, 3} {
			events, _, err := s.ListEvents(ctx, store.EventFilter{SandboxID: batch[i].ID})
			if err != nil || len(events) != 1 || events[0].Type != store.EventCreated {
				t.Fatalf("events of %s: %v %v, want its created event", batch[i].ID, events, err)
			}
		}
	})

	t.Run("a refused insert", func(t *testing.T) {
		dup := sandbox("")
		dup.ID = taken.ID
		batch := []store.Sandbox{sandbox(""), dup, sandbox("")}
		sizes, rs := round(t, batch)
		if fmt.Sprint(sizes) != "[1 3]" {
			t.Fatalf("batch sizes %v, want [1 3]", sizes)
		}
		if api.CodeOf(rs[1].err) != api.CodeInvalidState {
			t.Fatalf("an existing ID: %v, want invalid_state", rs[1].err)
		}
		for _, i := range []int{0, 2} {
			if rs[i].err != nil || !rs[i].created {
				t.Fatalf("create %d: created=%v err=%v", i, rs[i].created, rs[i].err)
			}
			got, err := s.GetSandbox(ctx, batch[i].ID)
			if err != nil || got.State != store.StateProvisioning {
				t.Fatalf("get %s: %+v %v", batch[i].ID, got, err)
			}
		}
	})
}
