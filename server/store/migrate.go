package store

import (
	"fmt"
	"io/fs"
	"regexp"
	"sort"
	"strconv"
)

// Migration is one embedded NNN_name.up.sql file.
type Migration struct {
	Version int
	Name    string
	SQL     string
}

var migrationName = regexp.MustCompile(`^(\d{3,})_([a-z0-9_]+)\.up\.sql$`)

// Migrations reads the NNN_name.up.sql files at the root of fsys, sorted by version.
// Other names are an error, so a misnamed file cannot be silently skipped; so are gaps
// and duplicate versions.
func Migrations(fsys fs.FS) ([]Migration, error) {
	entries, err := fs.ReadDir(fsys, ".")
	if err != nil {
		return nil, fmt.Errorf("store: read migrations: %w", err)
	}
	var out []Migration
	for _, e := range entries {
		m := migrationName.FindStringSubmatch(e.Name())
		if m == nil || e.IsDir() {
			return nil, fmt.Errorf("store: migration file %q is not named NNN_name.up.sql", e.Name())
		}
		v, _ := strconv.Atoi(m[1])
		b, err := fs.ReadFile(fsys, e.Name())
		if err != nil {
			return nil, fmt.Errorf("store: read migration: %w", err)
		}
		out = append(out, Migration{Version: v, Name: m[2], SQL: string(b)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	for i, m := range out {
		if m.Version != i+1 {
			return nil, fmt.Errorf("store: migration %03d_%s: versions must run 1, 2, 3... without gaps", m.Version, m.Name)
		}
	}
	return out, nil
}
