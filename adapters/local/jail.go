package local

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/adapters/devhost"
)

// sandboxUID is the user (and group) a command runs as inside its user namespace;
// it maps to the daemon's own user outside, so the sandbox's files stay the
// daemon's.
const sandboxUID = "1000"

// sandboxPATH is every command's PATH unless the sandbox sets its own: the
// daemon's may name directories the sandbox cannot see.
const sandboxPATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// etcFiles are the host's /etc entries a sandbox sees, read-only: what dynamic
// linking, TLS roots, time zones and Debian's alternatives (awk, for one) need.
// The rest of /etc (the host's users, its secrets, its configuration) is not
// there; passwd, group and hosts are the adapter's own.
var etcFiles = []string{
	"alternatives", "ca-certificates", "ca-certificates.conf", "ld.so.cache", "ld.so.conf",
	"ld.so.conf.d", "localtime", "mime.types", "nsswitch.conf", "ssl",
}

// jail runs each command of a sandbox in bwrap: new user, PID, network, IPC, UTS
// and cgroup namespaces; a root that holds the system directories read-only and
// the sandbox's own tree writable, at the same path as on the host.
type jail struct {
	bwrap   string
	key     string // tells this root's cgroups from another's
	etc     string // the adapter's passwd, group and hosts
	cg      *cgroups
	pidsMax int
	// acceptUnenforced: see Config.IgnoreResources.
	acceptUnenforced bool
	// disableUserns: bwrap can keep commands from making user namespaces, whose
	// kernel code is a large part of what an unprivileged process can reach.
	disableUserns bool
	// privateDev: each sandbox gets device nodes of its own (see devNodes).
	privateDev bool
	// devNote, when set, says for the description why privateDev is off though
	// the daemon runs as root.
	devNote string
	// egress is the allow-list pool's proxy; nil: no network at all.
	egress *egressProxy
	// bridge is the executable bound into each sandbox as its egress bridge.
	bridge string
	// sockets is the directory of the commands' proxy sockets (set by setup).
	sockets string
	// allow is the allow-list as configured, for the description.
	allow []string
}

// setEgress readies an allow-list pool's proxy and bridge.
func (j *jail) setEgress(c Config) error {
	if c.Egress != EgressAllowlist {
		return nil
	}
	rules := make([]allowRule, 0, len(c.EgressAllow))
	for _, e := range c.EgressAllow {
		r, err := parseAllowRule(e)
		if err != nil {
			return adapters.InvalidRequest("local: egressAllow: %v", err)
		}
		rules = append(rules, r)
	}
	j.bridge = c.Bridge
	if j.bridge == "" {
		exe, err := os.Executable()
		if err != nil {
			return adapters.Unavailable("local: egress: the bridge is this program, whose path is unknown: %v", err)
		}
		j.bridge = exe
	}
	j.egress = newEgressProxy(rules, c.Dial)
	j.allow = slices.Clone(c.EgressAllow)
	return nil
}

// egressText says what network a sandbox has, for the description.
func (j *jail) egressText() string {
	if j.egress == nil {
		return "no network"
	}
	return "no network but HTTP and HTTPS through the adapter's proxy (HTTP_PROXY, HTTPS_PROXY) to " +
		strings.Join(j.allow, ", ") + " only"
}

// devNodes are the device nodes a sandbox sees in /dev, with their numbers. When
// the daemon runs as root, a command's user maps to host root, which owns the
// host's nodes and may change their modes (chmod 000 /dev/null would break the
// host's services); such a daemon makes nodes of its own for each sandbox, beside
// its tree, and binds those instead of the host's.
var devNodes = []struct {
	name         string
	major, minor uint32
}{{"null", 1, 3}, {"zero", 1, 5}, {"full", 1, 7}, {"random", 1, 8}, {"urandom", 1, 9}, {"tty", 5, 0}}

var _ devhost.Jail = (*jail)(nil)

func (j *jail) Kind() string { return Kind }

func (j *jail) Template() string { return Template }

func (j *jail) cgroupName(id string) string { return j.key + "-" + id }

// usesCgroups reports whether commands are put into cgroups at all.
func (j *jail) usesCgroups() bool { return len(j.cg.dirs("x")) > 0 }

func (j *jail) CheckResources(r adapters.Resources) error {
	var missing []string
	if r.CPU > 0 && !j.cg.enforces("cpu") {
		missing = append(missing, "cpu")
	}
	if r.MemoryMiB > 0 && !j.cg.enforces("memory") {
		missing = append(missing, "memoryMiB")
	}
	if r.DiskGiB > 0 {
		missing = append(missing, "diskGiB")
	}
	if len(missing) == 0 || j.acceptUnenforced {
		return nil
	}
	return adapters.InvalidRequest("local: cannot enforce resources %s on this host (see the pool's description); "+
		"ask for none of them, or set ignoreResources in the pool's config to accept them for quota and cost only",
		strings.Join(missing, ", ")).WithDetail("unenforced", missing)
}

func (j *jail) BaseEnv(fsDir string) map[string]string {
	env := map[string]string{"PATH": sandboxPATH, "HOME": fsDir}
	if j.egress != nil {
		// Both cases: curl reads only the lower-case http_proxy, other clients the upper.
		proxy := "http://127.0.0.1:" + egressPort
		for _, k := range []string{"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"} {
			env[k] = proxy
		}
		env["NO_PROXY"], env["no_proxy"] = egressNoProxy, egressNoProxy
	}
	return env
}

// options are bwrap's options for a command of sb working in dir with env; socket,
// when not empty, is the host path of the command's egress proxy socket; onTerminal
// says the command runs on a terminal of its own (PTYExec).
func (j *jail) options(sb devhost.JailSandbox, dir string, env []string, socket string, onTerminal bool) []string {
	o := []string{
		"--unshare-user", "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
		"--uid", sandboxUID, "--gid", sandboxUID, "--hostname", "sandbox",
		// Killing bwrap kills the namespace's first process, and with it every
		// process in the namespace: nothing a command starts outlives it.
		"--die-with-parent",
		"--cap-drop", "ALL",
		"--ro-bind", "/usr", "/usr",
	}
	if !onTerminal {
		// No TIOCSTI into a terminal of the daemon's. A command on a terminal of
		// its own keeps it as its controlling terminal, for job control: what it
		// could push into that terminal is its own input.
		o = append(o, "--new-session")
	}
	if j.disableUserns {
		o = append(o, "--disable-userns")
	}
	for _, d := range []string{"bin", "sbin", "lib", "lib32", "lib64", "libx32"} {
		p := "/" + d
		fi, err := os.Lstat(p)
		switch {
		case err != nil:
		case fi.Mode()&os.ModeSymlink != 0:
			if target, err := os.Readlink(p); err == nil {
				o = append(o, "--symlink", target, p)
			}
		case fi.IsDir():
			o = append(o, "--ro-bind", p, p)
		}
	}
	for _, e := range etcFiles {
		o = append(o, "--ro-bind-try", "/etc/"+e, "/etc/"+e)
	}
	for _, e := range []string{"passwd", "group", "hosts"} {
		o = append(o, "--ro-bind", filepath.Join(j.etc, e), "/etc/"+e)
	}
	o = append(o,
		"--proc", "/proc",
		// Owned by host root: a daemon running as root maps commands to it, and
		// bwrap leaves /proc/sys writable then (core_pattern runs a program as
		// host root). The host's, read-only: sysctls are the kernel's anyway.
		"--ro-bind", "/proc/sys", "/proc/sys", "--ro-bind-try", "/proc/sysrq-trigger", "/proc/sysrq-trigger",
		"--dev", "/dev")
	if j.privateDev {
		dev := filepath.Join(filepath.Dir(sb.Dir), "dev")
		for _, n := range devNodes {
			o = append(o, "--dev-bind", filepath.Join(dev, n.name), "/dev/"+n.name)
		}
	}
	o = append(o, "--tmpfs", "/tmp", "--tmpfs", "/var/tmp", "--tmpfs", "/run")
	if socket != "" {
		o = append(o, "--ro-bind", j.bridge, bridgeExe, "--bind", socket, bridgeSocket)
	}
	o = append(o,
		// After /tmp: the tree may lie below it, and then goes on top of the tmpfs.
		"--bind", sb.Dir, sb.Dir,
		"--chdir", dir,
		"--clearenv")
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		o = append(o, "--setenv", k, v)
	}
	return o
}

func (j *jail) Kill(id string) {
	if j.usesCgroups() {
		j.cg.kill(j.cgroupName(id))
	}
}

func (j *jail) Remove(id string) {
	j.cg.remove(j.cgroupName(id))
}

func (j *jail) Freeze(id string, frozen bool) error {
	if !j.cg.canFreeze() {
		return adapters.Unsupported("pause")
	}
	if err := j.cg.freeze(j.cgroupName(id), frozen); err != nil {
		return adapters.Unavailable("local: freeze sandbox %s: %v", id, err)
	}
	return nil
}

// prune kills and removes the cgroups of this root's sandboxes that exist no
// more: a daemon that died between a Delete's kill and remove leaves them.
func (j *jail) prune(exists func(id string) bool) {
	seen := map[string]bool{}
	for _, d := range j.cg.dirs("") {
		entries, _ := os.ReadDir(d)
		for _, e := range entries {
			if id, ok := strings.CutPrefix(e.Name(), j.key+"-"); ok && e.IsDir() && !seen[id] {
				seen[id] = true
				if !exists(id) {
					j.cg.kill(e.Name())
					j.cg.remove(e.Name())
				}
			}
		}
	}
}

// writeEtc writes the passwd, group and hosts files sandboxes see into dir.
func writeEtc(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	files := map[string]string{
		"passwd": "root:x:0:0:root:/root:/bin/sh\nsandbox:x:" + sandboxUID + ":" + sandboxUID + ":sandbox:/tmp:/bin/sh\n" +
			"nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n",
		"group": "root:x:0:\nsandbox:x:" + sandboxUID + ":\nnogroup:x:65534:\n",
		"hosts": "127.0.0.1 localhost sandbox\n::1 localhost ip6-localhost ip6-loopback\n",
	}
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			return err
		}
	}
	return nil
}

var errNoBwrap = errors.New("bwrap not found in PATH (Debian and Ubuntu: apt-get install bubblewrap)")
