package devhost

import (
	"os"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/different-ai/differently/adapters"
)

// openPTY opens a new terminal: its master, kept here, and the terminal itself for
// the command. The master is opened non-blocking, so that Go's poller serves its
// reads and Close ends a read in progress, as for the pipes; a blocking one would
// hold wait up for as long as an escaped process keeps the terminal open.
func openPTY() (master, tty *os.File, err error) {
	fd, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, err
	}
	n, err := unix.IoctlGetUint32(fd, unix.TIOCGPTN)
	if err == nil {
		err = unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0) // unlock the terminal
	}
	if err != nil {
		_ = unix.Close(fd)
		return nil, nil, err
	}
	master = os.NewFile(uintptr(fd), "/dev/ptmx")
	name := "/dev/pts/" + strconv.FormatUint(uint64(n), 10)
	if tty, err = os.OpenFile(name, os.O_RDWR|unix.O_NOCTTY, 0); err != nil {
		_ = master.Close()
		return nil, nil, err
	}
	return master, tty, nil
}

// setWinsize sets a terminal's size through its raw descriptor: File.Fd would put
// the file in blocking mode, and a blocked read would then not end with Close.
func setWinsize(f *os.File, sz adapters.TermSize) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var ioErr error
	if err := rc.Control(func(fd uintptr) {
		ioErr = unix.IoctlSetWinsize(int(fd), unix.TIOCSWINSZ, &unix.Winsize{Col: sz.Cols, Row: sz.Rows})
	}); err != nil {
		return err
	}
	return ioErr
}
