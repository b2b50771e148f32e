// Package devhost is the development adapter: every sandbox is a directory on the
// daemon's own host and every exec a host process running as the daemon's user.
// Nothing isolates sandboxes from each other or from the host, so it is for dev mode
// only; what it does provide is the full adapter contract (idempotent Create, state
// that survives a restart, streamed exec, files, stop/start, disk snapshots), which
// makes it the reference backend for exercising the control plane end to end.
//
// Layout under the root directory:
//
//	sandboxes/<id>/meta.json   instance record (0600: it holds the sandbox env)
//	sandboxes/<id>/fs/         the sandbox's file tree; exec cwd and HOME
//	snapshots/<ref>/fs/        a copied file tree
//	snapshots/<ref>/snapshot.json
//
// A directory counts as existing only once its record file is in place. Both kinds
// of directory are assembled under a staging name and renamed into place, so a crash
// never leaves a half-built sandbox or snapshot behind a valid name.
//
// One Adapter per root at a time: the locks that make Create idempotent under
// concurrency are in-process.
package devhost

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/api"
)

// Kind is the adapter kind name used in pool configuration.
const Kind = "devhost"

// Version of this adapter implementation, reported in Info.
const Version = "1"

// Config is the pool configuration of a devhost adapter.
type Config struct {
	// Root is the directory that holds every sandbox and snapshot. Required.
	Root string `json:"root"`
	// IgnoreResources accepts requested resources that devhost cannot apply (host
	// processes are not limited), so that quota and cost, which count what was
	// requested, can be tried out on devhost. Without it such a request is
	// invalid_request rather than silently unmet.
	IgnoreResources bool `json:"ignoreResources,omitempty"`
}

// Template is the one template devhost offers: the host itself. A request may name
// it or leave the template empty.
const Template = "devhost"

// ParseConfig reads a pool's config map: "root" (a non-empty string, required) and
// "ignoreResources" (a boolean). Any other key is an error rather than silently
// ignored, so a typo in the operator's config does not go unnoticed.
func ParseConfig(cfg map[string]any) (Config, error) {
	var unknown []string
	for k := range cfg {
		if k != "root" && k != "ignoreResources" {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		slices.Sort(unknown)
		return Config{}, adapters.InvalidRequest("devhost: unknown config key %q", unknown[0]).
			WithDetail("unknown", unknown)
	}
	raw, ok := cfg["root"]
	if !ok {
		return Config{}, adapters.InvalidRequest("devhost: config key %q is required", "root").WithDetail("key", "root")
	}
	root, ok := raw.(string)
	if !ok {
		return Config{}, adapters.InvalidRequest("devhost: config key %q must be a string, not %T", "root", raw).WithDetail("key", "root")
	}
	if strings.TrimSpace(root) == "" || strings.ContainsRune(root, 0) {
		return Config{}, adapters.InvalidRequest("devhost: config key %q must be a directory path", "root").WithDetail("key", "root")
	}
	c := Config{Root: root}
	if raw, ok := cfg["ignoreResources"]; ok {
		if c.IgnoreResources, ok = raw.(bool); !ok {
			return Config{}, adapters.InvalidRequest("devhost: config key %q must be true or false, not %T", "ignoreResources", raw).
				WithDetail("key", "ignoreResources")
		}
	}
	return c, nil
}

// FromConfig builds an adapter from a pool's config map.
func FromConfig(cfg map[string]any, opts ...Option) (*Adapter, error) {
	c, err := ParseConfig(cfg)
	if err != nil {
		return nil, err
	}
	if c.IgnoreResources {
		opts = append([]Option{WithIgnoreResources()}, opts...)
	}
	return New(c.Root, opts...)
}

// WithIgnoreResources is Config.IgnoreResources.
func WithIgnoreResources() Option {
	return func(a *Adapter) { a.ignoreResources = true }
}

// Option adjusts an Adapter built by New.
type Option func(*Adapter)

// WithClock sets the clock used for creation timestamps and snapshot IDs. Exec
// timeouts and durations always use the real monotonic clock: a fake clock there
// could never fire.
func WithClock(now func() time.Time) Option {
	return func(a *Adapter) {
		if now != nil {
			a.now = now
		}
	}
}

// Adapter runs sandboxes as host processes. It is safe for concurrent use.
type Adapter struct {
	root string
	now  func() time.Time
	// ignoreResources: see Config.IgnoreResources.
	ignoreResources bool

	locks keyedMutex
	procs procTable
	track *tracker
	// jail, when set, confines commands instead of track (see Jail).
	jail Jail
}

var (
	_ adapters.ExecutionAdapter = (*Adapter)(nil)
	_ adapters.Streamer         = (*Adapter)(nil)
	_ adapters.ByteStreamer     = (*Adapter)(nil)
	_ adapters.FileSystem       = (*Adapter)(nil)
	_ adapters.FileStreamer     = (*Adapter)(nil)
	_ adapters.Lifecycle        = (*Adapter)(nil)
	_ adapters.Snapshotter      = (*Adapter)(nil)
)

// New opens (creating if needed, mode 0700) the root directory and its sandboxes and
// snapshots subdirectories. A relative root is made absolute, because it becomes the
// HOME and working directory of processes that must not depend on the daemon's cwd,
// and its symlinks are resolved (see Root).
func New(root string, opts ...Option) (*Adapter, error) {
	if strings.TrimSpace(root) == "" || strings.ContainsRune(root, 0) {
		return nil, adapters.InvalidRequest("devhost: root must be a directory path")
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, adapters.InvalidRequest("devhost: root %q: %v", root, err)
	}
	for _, dir := range []string{abs, filepath.Join(abs, "sandboxes"), filepath.Join(abs, "snapshots")} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, adapters.Unavailable("devhost: create %s: %v", dir, err)
		}
	}
	// Symlinks resolved: /proc/<pid>/cwd shows the real path, and the sweep that
	// finds a sandbox's processes by their working directory compares it with this.
	resolved, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return nil, adapters.Unavailable("devhost: root %s: %v", abs, err)
	}
	a := &Adapter{root: resolved, now: time.Now}
	for _, o := range opts {
		o(a)
	}
	if a.jail == nil {
		a.track = newTracker(resolved)
	} else {
		a.track = &tracker{} // no cgroup, and nothing to sweep: the jail kills
	}
	// What an earlier daemon's Deletes could not remove.
	a.pruneCgroups()
	return a, nil
}

// Root returns the root directory: absolute, without symlinks.
func (a *Adapter) Root() string { return a.root }

// SandboxDir returns the host directory of sandbox id's file tree, whether or not
// the sandbox exists; "" for an ID that could name no sandbox.
func (a *Adapter) SandboxDir(id string) string {
	if !validID(id) {
		return ""
	}
	return a.fsDir(id)
}

// template is the one template this adapter offers.
func (a *Adapter) template() string {
	if a.jail != nil {
		return a.jail.Template()
	}
	return Template
}

func (a *Adapter) sandboxesDir() string        { return filepath.Join(a.root, "sandboxes") }
func (a *Adapter) snapshotsDir() string        { return filepath.Join(a.root, "snapshots") }
func (a *Adapter) sandboxDir(id string) string { return filepath.Join(a.sandboxesDir(), id) }
func (a *Adapter) fsDir(id string) string      { return filepath.Join(a.sandboxDir(id), "fs") }

// Info implements adapters.ExecutionAdapter.
func (a *Adapter) Info() adapters.Info {
	return adapters.Info{
		Kind:      Kind,
		Version:   Version,
		Trust:     api.TrustPrivate,
		Isolation: "none: host processes in a per-sandbox directory",
		Protocol:  adapters.ProtocolVersion,
		Description: "Development only. Commands run as the daemon's user with a minimal environment; " +
			"processes a command leaves in the background are killed when the command ends, and every process of a sandbox on stop and delete, " +
			"also those that left the command's process group (setsid): they are found through a cgroup per command where the host allows one (cgroup v2), " +
			"else through the variable " + markerVar + " in their environment, which only a program started with a fresh environment sheds; " +
			"stop/start is a state flag; file modes are permission bits only. " +
			"The only template is " + Template + " (or none); requested resources are not applied, and are refused unless the pool sets ignoreResources.",
	}
}

// Capabilities implements adapters.ExecutionAdapter.
func (a *Adapter) Capabilities(context.Context) (_ adapters.Capabilities, err error) {
	defer a.rename(&err)
	features := []string{
		adapters.FeatureExec,
		adapters.FeatureExecStream,
		adapters.FeatureExecStdin,
		adapters.FeaturePTY,
		adapters.FeatureFiles,
		adapters.FeatureStopStart,
		adapters.FeaturePersistenceDisk,
		adapters.FeatureSnapshotsDisk,
		adapters.FeatureFork,
		adapters.FeatureIsolationNone,
	}
	switch runtime.GOARCH {
	case "amd64":
		features = append(features, adapters.FeatureArchAMD64)
	case "arm64":
		features = append(features, adapters.FeatureArchARM64)
	}
	slices.Sort(features)
	// Declaring the one template keeps placement from choosing this pool for
	// another, which Create would refuse.
	return adapters.Capabilities{Features: features, Templates: []string{Template}}, nil
}

// Capacity implements adapters.ExecutionAdapter. The host's load is not tracked; the
// pool's maxConcurrency is the only limit.
func (a *Adapter) Capacity(context.Context) (_ adapters.Capacity, err error) {
	defer a.rename(&err)
	return adapters.Capacity{Bounded: false}, nil
}

// Health implements adapters.ExecutionAdapter. Writing a probe file is the honest
// test: a root that exists but sits on a full or read-only filesystem cannot take work.
func (a *Adapter) Health(context.Context) (err error) {
	defer a.rename(&err)
	fi, err := os.Stat(a.root)
	if err != nil {
		return adapters.Unavailable("devhost: root directory: %v", err)
	}
	if !fi.IsDir() {
		return adapters.Unavailable("devhost: root %s is not a directory", a.root)
	}
	for _, dir := range []string{a.sandboxesDir(), a.snapshotsDir()} {
		f, err := os.CreateTemp(dir, ".health-*")
		if err != nil {
			return adapters.Unavailable("devhost: root directory is not writable: %v", err)
		}
		name := f.Name()
		cerr := f.Close()
		rerr := os.Remove(name)
		if err := errors.Join(cerr, rerr); err != nil {
			return adapters.Unavailable("devhost: root directory is not writable: %v", err)
		}
	}
	return nil
}

// maxIDLen bounds sandbox IDs and snapshot refs; both become directory names.
const maxIDLen = 128

// validID reports whether s can be used as a directory name under root: only
// [A-Za-z0-9_-], which rules out "", ".", "..", separators and staging names (those
// start with a dot), so no ID can ever address anything outside its own directory.
func validID(s string) bool {
	if len(s) == 0 || len(s) > maxIDLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// ctxError keeps both faces of an interrupted call: callers that switch on the api
// code see provider_unavailable, and errors.Is(err, context.Canceled) still works.
type ctxError struct {
	apiErr *api.Error
	cause  error
}

func (e *ctxError) Error() string   { return e.apiErr.Error() }
func (e *ctxError) Unwrap() []error { return []error{e.apiErr, e.cause} }

func contextError(err error) error {
	return &ctxError{apiErr: adapters.Unavailable("devhost: %v", err), cause: err}
}

func internalError(format string, args ...any) *api.Error {
	return api.Errorf(api.CodeInternal, "devhost: "+format, args...)
}
