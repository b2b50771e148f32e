// Package open picks a store driver from a database URL (DIFFERENTLY_DATABASE_URL). It is
// separate from package store because it imports both drivers, which import store.
package open

import (
	"context"
	"fmt"
	"strings"

	"github.com/different-ai/differently/server/store"
	"github.com/different-ai/differently/server/store/postgres"
	"github.com/different-ai/differently/server/store/sqlite"
)

// Driver names what Parse selected.
type Driver string

// The drivers.
const (
	Postgres Driver = "postgres"
	SQLite   Driver = "sqlite"
)

// Parse says which driver a URL selects and what that driver is opened with:
// postgres:// and postgresql:// URLs go to PostgreSQL unchanged; sqlite://PATH, file:PATH
// and a plain path go to SQLite with the path alone. Any other scheme is an error, so a
// typo such as "postgress://" is not taken for a file name.
func Parse(url string) (Driver, string, error) {
	switch {
	case url == "":
		return "", "", fmt.Errorf("store: empty database url")
	case strings.HasPrefix(url, "postgres://"), strings.HasPrefix(url, "postgresql://"):
		return Postgres, url, nil
	case strings.HasPrefix(url, "sqlite://"):
		return sqliteTarget(strings.TrimPrefix(url, "sqlite://"))
	case strings.HasPrefix(url, "file:"):
		return sqliteTarget(strings.TrimPrefix(url, "file:"))
	case strings.Contains(url, "://"):
		return "", "", fmt.Errorf("store: unsupported database url scheme in %q (want postgres://, sqlite:// or a file path)",
			url[:strings.Index(url, "://")+3])
	}
	return sqliteTarget(url)
}

func sqliteTarget(path string) (Driver, string, error) {
	if path == "" {
		return "", "", fmt.Errorf("store: sqlite url without a file path")
	}
	return SQLite, path, nil
}

// Open opens the store the URL selects (see Parse).
func Open(ctx context.Context, url string) (store.Store, error) {
	driver, target, err := Parse(url)
	if err != nil {
		return nil, err
	}
	// Each driver's nil *Store is returned as a nil interface: a typed nil would
	// pass the caller's nil check and fail later, in Close.
	if driver == Postgres {
		s, err := postgres.Open(ctx, target)
		if err != nil {
			return nil, err
		}
		return s, nil
	}
	s, err := sqlite.Open(ctx, target)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// SchemaVersion reports the migration version of the database url selects, and the
// latest this build has, changing nothing (Open would migrate).
func SchemaVersion(ctx context.Context, url string) (current, latest int, err error) {
	driver, target, err := Parse(url)
	if err != nil {
		return 0, 0, err
	}
	if driver == Postgres {
		return postgres.SchemaVersion(ctx, target)
	}
	return sqlite.SchemaVersion(ctx, target)
}
