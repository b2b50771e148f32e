package sqlite_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/different-ai/differently/server/store/sqlite"
)

// queryPlan is SQLite's plan for query with args, one step a line.
func queryPlan(t *testing.T, s *sqlite.Store, query string, args ...any) string {
	t.Helper()
	rows, err := sqlite.DB(s).QueryContext(t.Context(), "EXPLAIN QUERY PLAN "+query, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return strings.Join(plan, "\n")
}

// TestClaimUsesTheWarmIndex: a claim finds the shape's ready warm sandboxes through
// sandboxes_warm_ready, in the order it takes them, rather than walking every
// running sandbox of the pool.
func TestClaimUsesTheWarmIndex(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "differently.db"))
	got := queryPlan(t, s, sqlite.SelectWarmSQL, "alpha.k", "alpha")
	if !strings.Contains(got, "sandboxes_warm_ready") || strings.Contains(got, "TEMP B-TREE") {
		t.Errorf("the warm select's plan does not read sandboxes_warm_ready in order:\n%s", got)
	}
}

// TestKeyLookupUsesItsIndex: a create or a claim with an idempotency key finds the
// sandbox holding it through the key's unique index, rather than walking the
// project's sandboxes, terminated ones included.
func TestKeyLookupUsesItsIndex(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "differently.db"))
	got := queryPlan(t, s, sqlite.SelectByKeySQL, "acme", "web", "key-1")
	if !strings.Contains(got, "sandboxes_idempotency") {
		t.Errorf("the key lookup's plan does not use sandboxes_idempotency:\n%s", got)
	}
}
