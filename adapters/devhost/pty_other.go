//go:build !linux

package devhost

import (
	"errors"
	"os"

	"github.com/different-ai/differently/adapters"
)

var errNoPTY = errors.New("terminals are opened on Linux only")

func openPTY() (master, tty *os.File, err error) { return nil, nil, errNoPTY }

func setWinsize(*os.File, adapters.TermSize) error { return errNoPTY }
