//go:build unix

package httpapi

import "syscall"

// openFileLimit is the soft limit on the process's open files (Go raises it to the
// hard limit at start-up).
func openFileLimit() (uint64, bool) {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return 0, false
	}
	return uint64(l.Cur), true
}
