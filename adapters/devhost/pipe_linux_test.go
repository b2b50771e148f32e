package devhost

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

const fcntlGetPipeSize = 1032 // F_GETPIPE_SZ

func TestGrowPipe(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	growPipe(r)
	size, _, errno := syscall.Syscall(syscall.SYS_FCNTL, r.Fd(), fcntlGetPipeSize, 0)
	if errno != 0 {
		t.Fatal(errno)
	}
	limit := pipeSize
	if b, err := os.ReadFile("/proc/sys/fs/pipe-max-size"); err == nil {
		if n, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && n < limit && os.Geteuid() != 0 {
			limit = n
		}
	}
	if int(size) < limit {
		t.Fatalf("pipe holds %d bytes, want %d", size, limit)
	}
}
