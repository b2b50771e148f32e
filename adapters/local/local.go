// Package local is the adapter that runs sandboxes on the daemon's own host, each
// command confined by Bubblewrap (bwrap) in Linux namespaces of its own and, where
// the host offers them, in cgroups that enforce the sandbox's resources. It is
// devhost's store, files, snapshots and streaming (package devhost) with a jail
// around every command; docs/local.md says what that isolation covers and what it
// does not (it is not a VM: the kernel is shared).
package local

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"slices"
	"strings"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/adapters/devhost"
	"github.com/different-ai/differently/adapters/poolconfig"
	"github.com/different-ai/differently/api"
)

// Kind is the adapter kind name used in pool configuration.
const Kind = "local"

// Version of this adapter implementation, reported in Info.
const Version = "1"

// Template is the one template local offers: the host's system directories.
const Template = "local"

// DefaultPidsMax is how many processes (threads included) a sandbox may have at
// once when the pool does not say: enough for builds, too few for a fork bomb to
// hurt the host.
const DefaultPidsMax = 1024

// Config is the pool configuration of a local adapter.
type Config struct {
	// Root is the directory that holds every sandbox and snapshot. Required.
	Root string `json:"root"`
	// IgnoreResources accepts requested resources this host cannot enforce (disk
	// always; cpu and memory without their cgroup controllers), for quota and cost
	// only. Those it can enforce are enforced either way.
	IgnoreResources bool `json:"ignoreResources,omitempty"`
	// PidsMax bounds each sandbox's processes where the pids controller is
	// available; 0 means DefaultPidsMax.
	PidsMax int `json:"pidsMax,omitempty"`
	// Egress is EgressNone (also when empty: no network at all) or EgressAllowlist:
	// HTTP and HTTPS through the adapter's proxy to the hosts of EgressAllow only.
	Egress string `json:"egress,omitempty"`
	// EgressAllow are the allow-list's entries: host, *.domain or IP address, each
	// with an optional :port (without one, 80 and 443).
	EgressAllow []string `json:"egressAllow,omitempty"`
	// Bridge is the executable started inside a sandbox as its egress bridge (see
	// RunBridge); the running program's own when empty.
	Bridge string `json:"-"`
	// Dial, when set, replaces the egress proxy's dialer: tests name their
	// loopback upstreams with it. The allow-list still applies.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error) `json:"-"`
}

// ParseConfig reads a pool's config map: "root" (required), "ignoreResources",
// "pidsMax", "egress" and "egressAllow". Any other key is an error, so a typo does
// not go unnoticed.
func ParseConfig(cfg map[string]any) (Config, error) {
	r := poolconfig.Read(Kind, cfg)
	c := Config{
		Root:            r.String("root", ""),
		IgnoreResources: r.Bool("ignoreResources", false),
		PidsMax:         int(r.Int("pidsMax", 0)),
		Egress:          r.OneOf("egress", "", EgressNone, EgressAllowlist),
		EgressAllow:     r.Strings("egressAllow"),
	}
	if !r.Has("root") || strings.TrimSpace(c.Root) == "" || strings.ContainsRune(c.Root, 0) {
		r.Check("root", errors.New("must be a directory path"))
	}
	if r.Has("pidsMax") && (c.PidsMax < 1 || c.PidsMax > maxPids) {
		r.Check("pidsMax", fmt.Errorf("must be a whole number from 1 to %d", maxPids))
	}
	switch {
	case c.Egress == EgressAllowlist && len(c.EgressAllow) == 0:
		r.Check("egressAllow", errors.New("egress: allowlist needs at least one entry"))
	case c.Egress != EgressAllowlist && len(c.EgressAllow) > 0:
		r.Check("egressAllow", errors.New("applies only with egress: allowlist"))
	}
	for _, e := range c.EgressAllow {
		if _, err := parseAllowRule(e); err != nil {
			r.Check("egressAllow", err)
		}
	}
	if err := r.Err(); err != nil {
		return Config{}, err
	}
	return c, nil
}

// maxPids is the largest pidsMax: the kernel's own ceiling on PIDs.
const maxPids = 1 << 22

// FromConfig builds an adapter from a pool's config map.
func FromConfig(ctx context.Context, cfg map[string]any) (*Adapter, error) {
	c, err := ParseConfig(cfg)
	if err != nil {
		return nil, err
	}
	return New(ctx, c)
}

// Adapter runs each sandbox's commands in bwrap. It is safe for concurrent use.
type Adapter struct {
	*devhost.Adapter
	jail *jail
}

var (
	_ adapters.ExecutionAdapter = (*Adapter)(nil)
	_ adapters.Streamer         = (*Adapter)(nil)
	_ adapters.ByteStreamer     = (*Adapter)(nil)
	_ adapters.FileSystem       = (*Adapter)(nil)
	_ adapters.FileStreamer     = (*Adapter)(nil)
	_ adapters.Lifecycle        = (*Adapter)(nil)
	_ adapters.Pauser           = (*Adapter)(nil)
	_ adapters.Snapshotter      = (*Adapter)(nil)
)

// New opens (creating if needed) the root directory, finds what this host offers
// (bwrap, cgroups) and proves bwrap works by running a command through the same
// jail sandboxes get. An error means this host cannot run local sandboxes.
func New(ctx context.Context, c Config) (*Adapter, error) {
	if c.PidsMax == 0 {
		c.PidsMax = DefaultPidsMax
	}
	j, err := newJail(c)
	if err != nil {
		return nil, err
	}
	if err := j.setEgress(c); err != nil {
		return nil, err
	}
	inner, err := devhost.New(c.Root, devhost.WithJail(j))
	if err != nil {
		return nil, err
	}
	a := &Adapter{Adapter: inner, jail: j}
	if err := a.setup(ctx); err != nil {
		return nil, err
	}
	return a, nil
}

// keyOf tells one root's cgroups from another's on the same host; it is stable
// across restarts, so an earlier daemon's leftovers are found.
func keyOf(root string) string {
	sum := sha256.Sum256([]byte(root))
	return hex.EncodeToString(sum[:6])
}

// Isolated reports whether sandboxes run in their own namespaces. It is always
// true of an Adapter New returned; it is there for the log of dev mode.
func (a *Adapter) Isolated() bool { return a.jail != nil }

// Limits says which resource limits this host lets the adapter enforce, and
// what is missing, in words for a log or a description.
func (a *Adapter) Limits() string { return a.jail.limitsText() }

// Info implements adapters.ExecutionAdapter.
func (a *Adapter) Info() adapters.Info {
	return adapters.Info{
		Kind:      Kind,
		Version:   Version,
		Trust:     api.TrustPrivate,
		Isolation: "container: Linux namespaces via bwrap (user, PID, network, IPC, UTS, cgroup, mount); shared kernel",
		Protocol:  adapters.ProtocolVersion,
		Description: "Each command runs in bwrap as an unprivileged user in its own namespaces: the host's /usr (and /bin, /lib) read-only, " +
			"a few /etc files, private /tmp, and the sandbox's own directory read-write at its host path as HOME; " +
			a.jail.egressText() + "; no view of the daemon's files, environment or processes, nor of other sandboxes. " +
			"Processes a command leaves in the background die with it (its PID namespace ends). " +
			"The only template is " + Template + " (or none). " + a.jail.limitsText() + a.jail.devNote,
	}
}

// Capabilities implements adapters.ExecutionAdapter.
func (a *Adapter) Capabilities(context.Context) (adapters.Capabilities, error) {
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
		adapters.FeatureContainer,
		// No network, or the allow-list's hosts only: egress is always held.
		adapters.FeatureEgressControl,
	}
	if a.jail.cg.canFreeze() {
		features = append(features, adapters.FeaturePauseResume)
	}
	switch runtime.GOARCH {
	case "amd64":
		features = append(features, adapters.FeatureArchAMD64)
	case "arm64":
		features = append(features, adapters.FeatureArchARM64)
	}
	slices.Sort(features)
	return adapters.Capabilities{Features: features, Templates: []string{Template}}, nil
}

// Health implements adapters.ExecutionAdapter: devhost's check of the root, and
// bwrap still there (a package upgrade or removal takes it away under a running
// daemon, and every exec would then fail).
func (a *Adapter) Health(ctx context.Context) error {
	if err := a.Adapter.Health(ctx); err != nil {
		return err
	}
	if _, err := os.Stat(a.jail.bwrap); err != nil {
		return adapters.Unavailable("local: bwrap: %v", err)
	}
	return nil
}

// Pause implements adapters.Pauser by freezing the sandbox's cgroup.
func (a *Adapter) Pause(_ context.Context, ref string) error { return a.SetPaused(ref, true) }

// Resume implements adapters.Pauser.
func (a *Adapter) Resume(_ context.Context, ref string) error { return a.SetPaused(ref, false) }

// limitsText says which limits are enforced, and why not the others.
func (j *jail) limitsText() string {
	var on []string
	if j.cg.enforces("cpu") {
		on = append(on, "cpu")
	}
	if j.cg.enforces("memory") {
		on = append(on, "memoryMiB")
	}
	if j.cg.enforces("pids") {
		on = append(on, fmt.Sprintf("at most %d processes", j.pidsMax))
	}
	s := "Resources enforced with cgroups: none."
	if len(on) > 0 {
		s = "Resources enforced with cgroups: " + strings.Join(on, ", ") + "."
	}
	s += " Not enforced: diskGiB"
	if len(j.cg.why) > 0 {
		s += "; " + strings.Join(j.cg.why, "; ")
	}
	return s + ". "
}

// Enforces reports whether the cgroup controller ctl ("cpu", "memory", "pids")
// limits this adapter's sandboxes.
func (a *Adapter) Enforces(ctl string) bool { return a.jail.cg.enforces(ctl) }
