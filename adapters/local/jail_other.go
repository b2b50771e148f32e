//go:build !linux

package local

import (
	"errors"
	"os/exec"

	"github.com/different-ai/differently/adapters/devhost"
)

// Wrap implements devhost.Jail: bwrap needs Linux namespaces.
func (j *jail) Wrap(devhost.JailSandbox, *exec.Cmd) (func(error) error, func(), error) {
	return nil, nil, errors.New("local: sandboxes need Linux")
}
