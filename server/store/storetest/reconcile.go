package storetest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/server/store"
)

// A recorded pass reads back as written (times to the microsecond), and bad passes
// are refused with nothing written.
func testReconcilePassRoundTrip(t *testing.T, d Driver) {
	ctx := ctxFor(t)
	s := d.New(t)
	in := store.ReconcilePass{StartedAt: t0, EndedAt: t0.Add(1500 * time.Millisecond), Replica: "r1",
		Trigger: store.TriggerOnDemand, TokenID: "tok_1", Error: "leadership lost",
		Pools: []store.ReconcilePoolReport{
			{Pool: "a", OrphansDeleted: []string{"ref-1"}, Adopted: []string{"sbx_1"}, Requeued: []string{"sbx_2"},
				Lost: []string{"sbx_3"}, StateChanged: []string{"sbx_4"}, Duplicates: []string{"ref-2"},
				Errors: []string{"delete ref-3: refused"}},
			{Pool: "b", Skipped: "list failed: boom"},
		}}
	out := must[store.ReconcilePass](t)(s.RecordReconcilePass(ctx, in, 0))
	if out.ID <= 0 {
		t.Fatalf("recorded pass has ID %d", out.ID)
	}
	want := in
	want.ID, want.StartedAt, want.EndedAt = out.ID, ts(in.StartedAt), ts(in.EndedAt)
	equal(t, "recorded pass", out, want)
	items, next, err := s.ListReconcilePasses(ctx, store.ReconcilePassFilter{})
	noErr(t, err)
	equal(t, "listed passes", items, []store.ReconcilePass{want})
	equal(t, "next cursor", next, "")

	// A periodic pass over no pool.
	empty := must[store.ReconcilePass](t)(s.RecordReconcilePass(ctx,
		store.ReconcilePass{StartedAt: t0, EndedAt: t0, Replica: "r2", Trigger: store.TriggerPeriodic}, 0))
	if len(empty.Pools) != 0 || empty.TokenID != "" || empty.ID <= out.ID {
		t.Fatalf("empty pass read back as %+v (first was %d)", empty, out.ID)
	}

	for _, bad := range []store.ReconcilePass{
		{StartedAt: t0, EndedAt: t0, Replica: "r1", Trigger: "sometimes"},
		{StartedAt: t0, EndedAt: t0, Trigger: store.TriggerPeriodic},
		{StartedAt: t0, EndedAt: t0.Add(-time.Second), Replica: "r1", Trigger: store.TriggerPeriodic},
	} {
		_, err := s.RecordReconcilePass(ctx, bad, 0)
		wantCode(t, err, api.CodeInvalidRequest)
	}
	items, _, err = s.ListReconcilePasses(ctx, store.ReconcilePassFilter{})
	noErr(t, err)
	if len(items) != 2 {
		t.Fatalf("%d passes after refused records, want 2", len(items))
	}
	for _, c := range []string{"nope", store.EncodeCursor("x"), store.EncodeCursor("-4")} {
		_, _, err := s.ListReconcilePasses(ctx, store.ReconcilePassFilter{Cursor: c})
		wantCode(t, err, api.CodeInvalidRequest)
	}
	_, _, err = s.ListReconcilePasses(ctx, store.ReconcilePassFilter{Limit: -1})
	wantCode(t, err, api.CodeInvalidRequest)
}

// Passes list newest first, page by page without gaps or repeats, and recording
// one keeps only the newest keep.
func testReconcilePassPagingAndRetention(t *testing.T, d Driver) {
	ctx := ctxFor(t)
	s := d.New(t)
	record := func(i, keep int) store.ReconcilePass {
		at := t0.Add(time.Duration(i) * time.Minute)
		return must[store.ReconcilePass](t)(s.RecordReconcilePass(ctx, store.ReconcilePass{StartedAt: at, EndedAt: at,
			Replica: fmt.Sprintf("r%d", i), Trigger: store.TriggerPeriodic}, keep))
	}
	for i := range 7 {
		record(i, 0)
	}
	var replicas []string
	cursor := ""
	for pages := 0; ; pages++ {
		if pages > 7 {
			t.Fatal("paging does not end")
		}
		items, next, err := s.ListReconcilePasses(ctx, store.ReconcilePassFilter{Cursor: cursor, Limit: 3})
		noErr(t, err)
		for _, p := range items {
			replicas = append(replicas, p.Replica)
		}
		if next == "" {
			break
		}
		cursor = next
	}
	equal(t, "passes, newest first", replicas, []string{"r6", "r5", "r4", "r3", "r2", "r1", "r0"})

	// Keep 4: the record and the prune are one write.
	record(7, 4)
	items, _, err := s.ListReconcilePasses(ctx, store.ReconcilePassFilter{})
	noErr(t, err)
	replicas = replicas[:0]
	for _, p := range items {
		replicas = append(replicas, p.Replica)
	}
	equal(t, "passes kept", replicas, []string{"r7", "r6", "r5", "r4"})

	// Concurrent records, as from two replicas one after the other's lease, never
	// leave more than keep.
	var wg sync.WaitGroup
	for i := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			at := t0.Add(time.Hour)
			if _, err := s.RecordReconcilePass(ctx, store.ReconcilePass{StartedAt: at, EndedAt: at,
				Replica: fmt.Sprintf("c%d", i), Trigger: store.TriggerOnDemand, TokenID: "tok"}, 3); err != nil {
				t.Errorf("concurrent record: %v", err)
			}
		}()
	}
	wg.Wait()
	items, _, err = s.ListReconcilePasses(ctx, store.ReconcilePassFilter{})
	noErr(t, err)
	if len(items) != 3 {
		t.Fatalf("%d passes kept after concurrent records with keep 3", len(items))
	}
	for i := 1; i < len(items); i++ {
		if items[i].ID >= items[i-1].ID {
			t.Fatalf("passes not newest first: %d then %d", items[i-1].ID, items[i].ID)
		}
	}
}
