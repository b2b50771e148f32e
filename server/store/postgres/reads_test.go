package postgres_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/internal/pgtest"
	"github.com/different-ai/differently/server/store"
)

// TestReadsShareAStatement: reads that queue behind one in flight are sent
// together, and each gets its own sandbox: a missing one is not_found alone, and a
// sandbox asked for twice is read once per caller, in the batch after.
func TestReadsShareAStatement(t *testing.T) {
	s := open(t, pgtest.SchemaURL(t))
	ctx := t.Context()
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	var ids []string
	for i := range 3 {
		sb := store.Sandbox{ID: fmt.Sprintf("sbx_%03d", i), Org: "org1", Project: "proj1",
			State: store.StateRunning, Pool: "alpha", Labels: map[string]string{"n": fmt.Sprint(i)}}
		if _, _, err := s.CreateSandbox(ctx, t0, sb); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, sb.ID)
	}
	want := []string{ids[1], "sbx_missing", ids[2], ids[1]}

	type result struct {
		sb  store.Sandbox
		err error
	}
	results := make([]result, len(want))
	calls := make([]func(), len(want))
	for i, id := range want {
		calls[i] = func() { results[i].sb, results[i].err = s.GetSandbox(ctx, id) }
	}
	sizes := sharedRound(t, s.HookReads, func() {
		if got, err := s.GetSandbox(ctx, ids[0]); err != nil || got.ID != ids[0] {
			t.Errorf("the leading read: %s %v", got.ID, err)
		}
	}, calls)

	if !slices.Equal(sizes, []int{1, 3, 1}) {
		t.Fatalf("batch sizes %v, want [1 3 1]: the lone read, the three distinct IDs, the repeated one", sizes)
	}
	for i, id := range want {
		r := results[i]
		if id == "sbx_missing" {
			if api.CodeOf(r.err) != api.CodeNotFound {
				t.Fatalf("read of a missing sandbox: %v, want not_found", r.err)
			}
			continue
		}
		if r.err != nil || r.sb.ID != id || r.sb.State != store.StateRunning || r.sb.Labels["n"] != id[len(id)-1:] {
			t.Fatalf("read %d of %s: %+v %v", i, id, r.sb, r.err)
		}
	}
	// The two reads of one sandbox have rows of their own.
	results[0].sb.Labels["n"] = "changed"
	if results[3].sb.Labels["n"] != "1" {
		t.Fatal("two reads of one sandbox share its labels")
	}
}
