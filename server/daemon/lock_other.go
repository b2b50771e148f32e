//go:build !unix

package daemon

import "os"

// tryLock has no lock to take on systems without flock: a second daemon on the same
// database is not detected there.
func tryLock(*os.File) (bool, error) { return false, nil }
