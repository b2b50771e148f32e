package defaults

import (
	"errors"
	"os"
	"path/filepath"
)

// DataDir is the per-user data folder of a development installation:
// $XDG_DATA_HOME/differently, else ~/.local/share/differently. The daemon keeps its
// database, devhost sandboxes and admin token there when --dev gets no --data-dir,
// and the differently command line reads that admin token from it, so both must
// compute it alike.
func DataDir(getenv func(string) string) (string, error) {
	if d := getenv("XDG_DATA_HOME"); d != "" {
		return filepath.Join(d, "differently"), nil
	}
	home := getenv("HOME")
	if home == "" {
		var err error
		if home, err = os.UserHomeDir(); err != nil {
			return "", errors.New("no data folder: set XDG_DATA_HOME or HOME")
		}
	}
	return filepath.Join(home, ".local", "share", "differently"), nil
}

// AdminTokenFile is the file in DataDir that holds the first admin token of a
// development installation.
const AdminTokenFile = "admin-token"

// URL is the API's address for a client given none: the daemon's default Listen.
const URL = "http://" + Listen
