package open_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/different-ai/differently/server/store/open"
	"github.com/different-ai/differently/server/store/sqlite"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		url    string
		driver open.Driver
		target string
	}{
		{"postgres://u@h/db?sslmode=disable", open.Postgres, "postgres://u@h/db?sslmode=disable"},
		{"postgresql://h/db", open.Postgres, "postgresql://h/db"},
		{"sqlite:///var/lib/d/db.sqlite", open.SQLite, "/var/lib/d/db.sqlite"},
		{"sqlite://rel/db.sqlite", open.SQLite, "rel/db.sqlite"},
		{"file:/data/db.sqlite", open.SQLite, "/data/db.sqlite"},
		{"/data/db.sqlite", open.SQLite, "/data/db.sqlite"},
		{"db.sqlite", open.SQLite, "db.sqlite"},
	} {
		d, target, err := open.Parse(tc.url)
		if err != nil || d != tc.driver || target != tc.target {
			t.Errorf("Parse(%q) = %q, %q, %v; want %q, %q", tc.url, d, target, err, tc.driver, tc.target)
		}
	}
	for _, bad := range []string{"", "mysql://h/db", "postgress://h/db", "sqlite://", "file:"} {
		if _, _, err := open.Parse(bad); err == nil {
			t.Errorf("Parse(%q) succeeded", bad)
		}
	}
}

func TestOpenSQLite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "db.sqlite")
	s, err := open.Open(context.Background(), "sqlite://"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, ok := s.(*sqlite.Store); !ok {
		t.Fatalf("Open returned %T", s)
	}
	if err := s.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
}
