package devhost

import (
	"os"
	"syscall"
)

// fcntlSetPipeSize is F_SETPIPE_SZ, which package syscall does not name.
const fcntlSetPipeSize = 1031

// growPipe asks the kernel for a pipe of pipeSize bytes, so that output produced
// while the previous piece was forwarded can be read in one go. It is best effort:
// an unprivileged user past fs.pipe-user-pages-soft keeps the default size.
func growPipe(f *os.File) {
	rc, err := f.SyscallConn()
	if err != nil {
		return
	}
	_ = rc.Control(func(fd uintptr) {
		_, _, _ = syscall.Syscall(syscall.SYS_FCNTL, fd, fcntlSetPipeSize, pipeSize)
	})
}
