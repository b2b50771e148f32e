package devhost

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// A command's process group does not hold everything it starts: a process that calls
// setsid (or setpgid) leaves it, and a kill of the group misses it. The tracker finds
// a sandbox's processes by what they cannot leave on their own:
//
//   - a cgroup (v2) per command, inside one per sandbox, when the host lets the
//     daemon make them: the command starts inside it (clone3 CLONE_INTO_CGROUP), so
//     do all its descendants, and cgroup.kill ends them all at once;
//   - else the variable markerVar, which every command gets in its environment and
//     its descendants inherit: /proc/<pid>/environ is what the process was started
//     with, whatever it has changed since, so only a program started with a fresh
//     environment (env -i) sheds it.
//
// Both are swept on Stop and Delete (with processes whose working directory is in the
// sandbox's tree), the marker also at a command's end when no cgroup could be made.

// markerVar is the variable that marks a sandbox's processes. Its value is
// "<root key>:<sandbox id>:<exec id>".
const markerVar = "DIFFERENTLY_DEVHOST_EXEC"

type tracker struct {
	// key tells this root's sandboxes from another devhost root's on the same host;
	// it is stable across restarts, so leftovers of an earlier daemon are found too.
	key string
	// cgroup is the directory under which sandboxes get their cgroups (named
	// "<key>-<id>", removed with the sandbox), or "" when the host has no usable
	// cgroup v2 hierarchy for us.
	cgroup string
	// beforeKillExec, when set (by tests), runs as killExec starts.
	beforeKillExec func()
}

func newTracker(root string) *tracker {
	sum := sha256.Sum256([]byte(root))
	t := &tracker{key: hex.EncodeToString(sum[:6])}
	t.cgroup = findCgroup("differently-devhost")
	return t
}

// findCgroup makes (or finds) a child cgroup named name of the daemon's own cgroup
// in the v2 hierarchy, and returns its path when it can kill (cgroup.kill, Linux
// 5.14) and take processes. Anything else means no cgroup tracking.
func findCgroup(name string) string {
	mount := cgroup2Mount()
	if mount == "" {
		return ""
	}
	self, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return ""
	}
	var rel string
	for line := range strings.SplitSeq(string(self), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			rel = p
		}
	}
	if rel == "" {
		return ""
	}
	dir := filepath.Join(mount, rel, name)
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return ""
	}
	if _, err := os.Stat(filepath.Join(dir, "cgroup.kill")); err != nil {
		return ""
	}
	return dir
}

// cgroup2Mount is where the cgroup v2 hierarchy is mounted (/sys/fs/cgroup, or
// /sys/fs/cgroup/unified on hybrid hosts), or "".
func cgroup2Mount() string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// ID parent major:minor root mountpoint options [optional...] - fstype source superoptions
		fields := strings.Fields(sc.Text())
		for i, f := range fields {
			if f == "-" && i+1 < len(fields) && fields[i+1] == "cgroup2" && len(fields) > 4 {
				return fields[4]
			}
		}
	}
	return ""
}

func (t *tracker) marker(id, execID string) string { return t.key + ":" + id + ":" + execID }

func (t *tracker) sandboxCgroup(id string) string {
	return filepath.Join(t.cgroup, t.key+"-"+id)
}

// execGroup is one command's cgroup.
type execGroup struct {
	dir string
	fd  *os.File // the open directory, for CLONE_INTO_CGROUP; closed once started
}

// newExecGroup makes the cgroup of one command of sandbox id, or returns nil when
// there is no cgroup tracking.
func (t *tracker) newExecGroup(id, execID string) *execGroup {
	if t.cgroup == "" {
		return nil
	}
	sb := t.sandboxCgroup(id)
	if err := os.Mkdir(sb, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil
	}
	dir := filepath.Join(sb, execID)
	if err := os.Mkdir(dir, 0o755); err != nil {
		// Not to leave the sandbox's cgroup behind empty; rmdir refuses while
		// another command's is in it.
		_ = syscall.Rmdir(sb)
		return nil
	}
	fd, err := os.Open(dir)
	if err != nil {
		(&execGroup{dir: dir}).remove()
		return nil
	}
	return &execGroup{dir: dir, fd: fd}
}

// remove removes the cgroup of a command that was never started in it, and the
// sandbox's cgroup when no other command's is in it.
func (g *execGroup) remove() {
	removeCgroup(g.dir)
	_ = syscall.Rmdir(filepath.Dir(g.dir))
}

// started closes the directory once the command is in the cgroup (or failed).
func (g *execGroup) started() {
	if g != nil && g.fd != nil {
		_ = g.fd.Close()
		g.fd = nil
	}
}

// killExec ends whatever one command of the sandbox whose tree is dir left running,
// wherever it has moved.
func (t *tracker) killExec(id, execID, dir string, g *execGroup) {
	if t.beforeKillExec != nil {
		t.beforeKillExec()
	}
	if g != nil {
		killCgroup(g.dir)
		// The sandbox's cgroup goes too once no command is in it (rmdir refuses
		// while one is), so that sandboxes nobody deletes leave nothing behind. A
		// command starting meanwhile may miss it and run with the marker alone.
		_ = syscall.Rmdir(filepath.Dir(g.dir))
		return
	}
	want := markerVar + "=" + t.marker(id, execID)
	sweep(dir, func(_ string, env []byte) bool {
		return hasEntry(env, markerVar, func(v []byte) bool { return string(v) == want })
	})
}

// killSandbox ends every process of sandbox id, whose file tree is dir, and removes
// its cgroups.
func (t *tracker) killSandbox(id, dir string) {
	if t.cgroup != "" {
		cg := t.sandboxCgroup(id)
		if _, err := os.Stat(cg); err == nil {
			killCgroup(cg)
		}
	}
	// Always, not only without cgroups: processes of a daemon that ran without them
	// (or of a command whose cgroup could not be made) carry only the marker. A
	// process of the daemon's user whose working directory is in the sandbox's tree
	// goes too: that is also where one that shed the marker most likely still is.
	// Another user's is not the sandbox's (commands run as the daemon's user): an
	// operator looking around in the directory, which a daemon running as root
	// would otherwise kill.
	prefix := []byte(markerVar + "=" + t.key + ":" + id + ":")
	sweep(dir, func(pid string, env []byte) bool {
		if hasEntry(env, markerVar, func(v []byte) bool { return bytes.HasPrefix(v, prefix) }) {
			return true
		}
		return ownedInTree(pid, dir)
	})
}

// cgroupIDs lists the sandboxes of this root that have a cgroup.
func (t *tracker) cgroupIDs() []string {
	if t.cgroup == "" {
		return nil
	}
	entries, _ := os.ReadDir(t.cgroup)
	var ids []string
	for _, e := range entries {
		if id, ok := strings.CutPrefix(e.Name(), t.key+"-"); ok && e.IsDir() {
			ids = append(ids, id)
		}
	}
	return ids
}

// dropCgroup kills what is left in sandbox id's cgroup and removes it if it is
// empty, without waiting: what is still dying is left for a later call.
func (t *tracker) dropCgroup(id string) {
	cg := t.sandboxCgroup(id)
	_ = os.WriteFile(filepath.Join(cg, "cgroup.kill"), []byte("1"), 0)
	removeCgroup(cg)
}

// cgroupDrain bounds the wait for a killed cgroup to empty before it is removed:
// SIGKILL is delivered at once, but a process in uninterruptible sleep (a slow
// disk) only dies when it wakes. A cgroup still populated then is left for the
// next killSandbox, or, once its sandbox is deleted, for pruneCgroups.
const cgroupDrain = 5 * time.Second

// killCgroup kills every process in dir and below, waits for them to be gone, and
// removes dir and its children.
func killCgroup(dir string) {
	if err := os.WriteFile(filepath.Join(dir, "cgroup.kill"), []byte("1"), 0); err != nil {
		return
	}
	deadline := time.Now().Add(cgroupDrain)
	for populated(dir) && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	removeCgroup(dir)
}

func populated(dir string) bool {
	data, err := os.ReadFile(filepath.Join(dir, "cgroup.events"))
	if err != nil {
		return false
	}
	return bytes.Contains(data, []byte("populated 1"))
}

// removeCgroup removes dir's child cgroups, then dir. Their files are not real:
// only rmdir of the directories works.
func removeCgroup(dir string) {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if e.IsDir() {
			removeCgroup(filepath.Join(dir, e.Name()))
		}
	}
	_ = syscall.Rmdir(dir)
}

// sweepRounds bounds the rounds of a sweep: a process may fork while a round runs,
// and its child is found by the next one; and a process in the middle of execve
// shows an empty environment until the new program's is in place, so one in the
// sandbox's tree with none is looked at again in the next round.
const sweepRounds = 200

// sweep kills every process (but this one) for which match, given its pid and its
// environment, is true; dir is the sandbox's tree. Each is opened as a pidfd before
// it is looked at and signalled through it, so a pid reused in between is never hit.
func sweep(dir string, match func(pid string, env []byte) bool) {
	self := os.Getpid()
	for range sweepRounds {
		again := false
		entries, err := os.ReadDir("/proc")
		if err != nil {
			return
		}
		for _, e := range entries {
			pid, err := strconv.Atoi(e.Name())
			if err != nil || pid == self {
				continue
			}
			pfd, err := unix.PidfdOpen(pid, 0)
			if err != nil {
				continue
			}
			env, err := os.ReadFile("/proc/" + e.Name() + "/environ")
			switch {
			case err != nil:
			case match(e.Name(), env):
				again = true // for what it may have forked meanwhile
				_ = unix.PidfdSendSignal(pfd, unix.SIGKILL, nil, 0)
			case len(env) == 0 && ownedInTree(e.Name(), dir) && !zombie(e.Name()):
				again = true
			}
			_ = unix.Close(pfd)
		}
		if !again {
			return
		}
		// Let a process in execve get on with it.
		time.Sleep(100 * time.Microsecond)
	}
}

// ownedInTree reports whether pid runs as the daemon's user (its real uid) and
// works in dir or below.
func ownedInTree(pid, dir string) bool {
	return realUID(pid) == os.Geteuid() && inTree(pid, dir)
}

func inTree(pid, dir string) bool {
	cwd, err := os.Readlink("/proc/" + pid + "/cwd")
	return err == nil && (cwd == dir || strings.HasPrefix(cwd, dir+"/"))
}

// realUID is pid's real user ID, from the "Uid:" line of /proc/<pid>/status (real,
// effective, saved, filesystem), or -1 when it cannot be read.
func realUID(pid string) int {
	status, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		return -1
	}
	_, rest, ok := bytes.Cut(status, []byte("\nUid:"))
	if !ok {
		return -1
	}
	fields := bytes.Fields(rest)
	if len(fields) == 0 {
		return -1
	}
	uid, err := strconv.Atoi(string(fields[0]))
	if err != nil {
		return -1
	}
	return uid
}

func zombie(pid string) bool {
	stat, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return true
	}
	i := bytes.LastIndexByte(stat, ')')
	return i < 0 || i+2 >= len(stat) || stat[i+2] == 'Z' || stat[i+2] == 'X'
}

// hasEntry reports whether the NUL-separated environment env has an entry for name
// that match accepts.
func hasEntry(env []byte, name string, match func([]byte) bool) bool {
	prefix := []byte(name + "=")
	if !bytes.Contains(env, prefix) {
		return false
	}
	for entry := range bytes.SplitSeq(env, []byte{0}) {
		if bytes.HasPrefix(entry, prefix) && match(entry) {
			return true
		}
	}
	return false
}

// setCgroup has the command start inside group's cgroup.
func setCgroup(attr *syscall.SysProcAttr, group *execGroup) {
	if group != nil && group.fd != nil {
		attr.UseCgroupFD = true
		attr.CgroupFD = int(group.fd.Fd())
	}
}
