package devhost

import (
	"os/exec"
	"strings"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/api"
)

// Jail confines the commands of an Adapter's sandboxes. Without one (the default)
// they are host processes of the daemon's user; package local passes one that runs
// each command in namespaces of its own, so that the store, files, snapshots and
// streaming here serve both.
//
// With a jail, the adapter leaves the killing of a sandbox's processes to it: it
// neither marks commands' environments nor sweeps /proc nor makes cgroups of its own.
type Jail interface {
	// Kind names the adapter in its errors, in place of "devhost".
	Kind() string
	// Template is the one template the adapter offers, in place of Template.
	Template() string
	// CheckResources says whether a sandbox may ask for r: nil when the jail
	// enforces it, an invalid_request error otherwise.
	CheckResources(r adapters.Resources) error
	// BaseEnv is what every command's environment starts from, in place of the
	// daemon's PATH and the sandbox directory as HOME; the sandbox's own variables
	// and the request's are laid over it.
	BaseEnv(fsDir string) map[string]string
	// Wrap turns cmd, a command of sandbox sb ready to start as a host process, into
	// the one to start instead. The adapter then calls started exactly once, with
	// cmd.Start's error: on nil the jail lets the command run, and the adapter kills
	// it if started fails; on an error the jail only releases what Wrap took.
	// started is never nil when err is. exited, when not nil, is called once the
	// command that started has been waited for: what the jail keeps for the
	// command alone (a proxy serving it, say) ends there.
	Wrap(sb JailSandbox, cmd *exec.Cmd) (started func(startErr error) error, exited func(), err error)
	// Kill ends every process of sandbox id, including those its commands left
	// behind. The adapter calls it on Stop and Delete, after killing the commands
	// it knows of.
	Kill(id string)
	// Remove releases what the jail keeps for sandbox id; called on Delete, after Kill.
	Remove(id string)
	// Freeze freezes (or thaws) every process of sandbox id. An error means the
	// jail cannot, and SetPaused refuses.
	Freeze(id string, frozen bool) error
}

// JailSandbox is what a Jail learns about the sandbox a command belongs to.
type JailSandbox struct {
	ID string
	// Dir is the sandbox's file tree on the host: the command's HOME, and where
	// its working directory lies.
	Dir       string
	Resources adapters.Resources
}

// WithJail has the adapter run its sandboxes' commands through j.
func WithJail(j Jail) Option {
	return func(a *Adapter) { a.jail = j }
}

// rename makes an error of a jailed adapter's say its kind rather than devhost's:
// the messages are written once, here, for both.
func (a *Adapter) rename(err *error) {
	if a.jail == nil || *err == nil {
		return
	}
	e, ok := (*err).(*api.Error)
	if !ok {
		return
	}
	if rest, found := strings.CutPrefix(e.Message, "devhost: "); found {
		c := *e
		c.Message = a.jail.Kind() + ": " + rest
		*err = &c
	}
}
