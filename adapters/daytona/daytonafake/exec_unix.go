//go:build unix

package daytonafake

import (
	"os/exec"
	"syscall"
	"time"
)

// prepare runs the command in its own process group and kills the whole group at the
// timeout, so that a child holding the output pipe (sleep under sh) dies too.
func prepare(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
}
