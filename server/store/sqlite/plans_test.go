package sqlite_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/different-ai/differently/server/store/sqlite"
)

// TestClaimUsesTheWarmIndex: a claim finds the shape's ready warm sandboxes through
// sandboxes_warm_ready, in the order it takes them, rather than walking every
// running sandbox of the pool.
func TestClaimUsesTheWarmIndex(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "differently.db"))
	rows, err := sqlite.DB(s).QueryContext(t.Context(), "EXPLAIN QUERY PLAN "+sqlite.SelectWarmSQL, "alpha.k", "alpha")
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
	got := strings.Join(plan, "\n")
	if !strings.Contains(got, "sandboxes_warm_ready") || strings.Contains(got, "TEMP B-TREE") {
		t.Errorf("the warm select's plan does not read sandboxes_warm_ready in order:\n%s", got)
	}
}
