//go:build unix

package daemon

import (
	"errors"
	"os"
	"syscall"
)

// tryLock takes an exclusive flock on f without waiting; held reports that another
// open file (in this process or another) has it. flock, unlike fcntl's record locks,
// is per open file, so two daemons in one process (tests, custom builds) also
// exclude each other, and it is released when the holder's process dies.
func tryLock(f *os.File) (held bool, err error) {
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return true, nil
	}
	return false, err
}
