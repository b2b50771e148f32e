package daemon

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// InUseError is the refusal to start on a SQLite database another daemon has open:
// two daemons on one file would run two schedulers on the same sandboxes, each
// unaware of the other's claims in flight.
type InUseError struct {
	// Database is the SQLite file; LockFile is the file whose lock says it is taken.
	Database, LockFile string
	// PID is the holder's process ID as it wrote it, 0 when unknown.
	PID int
}

func (e *InUseError) Error() string {
	who := "another differently-server"
	if e.PID > 0 {
		who += fmt.Sprintf(" (pid %d)", e.PID)
	}
	return fmt.Sprintf("the SQLite database %s is in use by %s, which holds %s: stop that daemon first, "+
		"or give this one another --data-dir; several replicas need PostgreSQL (database.url)", e.Database, who, e.LockFile)
}

// lockFileFor names the lock file of a SQLite database: beside it, so that the lock
// covers the file whichever data folder or config names it.
func lockFileFor(dbPath string) string { return dbPath + ".lock" }

// dbLock is an exclusive lock on a SQLite database's lock file, held for the
// daemon's life. The operating system drops it when the process ends, however it
// ends, so a daemon killed with SIGKILL leaves nothing to clean up: the file stays,
// unlocked, and the next start takes it.
type dbLock struct{ f *os.File }

// lockDatabase takes the lock of dbPath's lock file, or returns an *InUseError naming
// the process that holds it.
func lockDatabase(dbPath string) (*dbLock, error) {
	path := lockFileFor(dbPath)
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("database lock: %w", err)
	}
	held, err := tryLock(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("database lock %s: %w", path, err)
	}
	if held {
		data, _ := os.ReadFile(path)
		pid, _ := strconv.Atoi(strings.TrimSpace(string(data)))
		f.Close()
		return nil, &InUseError{Database: dbPath, LockFile: path, PID: pid}
	}
	// The holder's PID, for the message of the next daemon that tries. It is a hint
	// only: the lock, not the content, decides.
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &dbLock{f: f}, nil
}

// release drops the lock. The file is left in place: removing it would let a
// daemon that opened it just before lock a file no longer on the path, while a third
// one created and locked a new one.
func (l *dbLock) release() {
	if l == nil || l.f == nil {
		return
	}
	_ = l.f.Truncate(0)
	l.f.Close()
	l.f = nil
}
