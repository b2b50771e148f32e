//go:build !unix

package daytonafake

import (
	"os/exec"
	"time"
)

// prepare bounds how long a killed command's children may hold its output open.
func prepare(cmd *exec.Cmd) { cmd.WaitDelay = 5 * time.Second }
