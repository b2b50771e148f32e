package local

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/different-ai/differently/adapters"
)

// A sandbox's processes all live in one cgroup per hierarchy, named
// "<key>-<id>" under a "differently-local" cgroup beside the daemon's own. Two
// layouts are met in practice:
//
//   - unified (cgroup v2 only): one directory does everything, the limits included
//     when the daemon's cgroup delegates the cpu, memory and pids controllers;
//   - hybrid (v1 controllers, with a v2 hierarchy that has none): the limits are
//     set in the v1 memory, pids and cpu hierarchies, and freezing and killing use
//     the v2 one (else the v1 freezer).
//
// A command is put into them before it runs anything: bwrap waits on --block-fd
// inside the new namespaces until its processes have been moved.

// cgroupRoot is the name of the cgroup, in each hierarchy, that holds the
// sandboxes' cgroups.
const cgroupRoot = "differently-local"

// cgroups is what this host offers. The zero value offers nothing.
type cgroups struct {
	// unified is the v2 parent directory, "" without a usable v2 hierarchy.
	unified string
	// limits maps a controller (cpu, memory, pids) to the parent directory whose
	// children enforce it: the unified one, or a v1 hierarchy's.
	limits map[string]string
	// freezer is the parent directory of the v1 freezer, used when unified is "".
	freezer string
	// why says what is missing, for the adapter's description and log.
	why []string
}

// probeCgroups finds, and creates, the parent cgroups. It never fails: what it
// cannot use is left out and said in why.
func probeCgroups() *cgroups {
	c := &cgroups{limits: map[string]string{}}
	mounts, err := readMounts()
	if err != nil {
		c.why = append(c.why, "cannot read /proc/self/mountinfo: "+err.Error())
		return c
	}
	self, err := readSelfCgroups()
	if err != nil {
		c.why = append(c.why, "cannot read /proc/self/cgroup: "+err.Error())
		return c
	}
	if m, ok := mounts["cgroup2"]; ok {
		if dir := makeParent(m, self[""]); dir != "" && exists(filepath.Join(dir, "cgroup.kill")) && exists(filepath.Join(dir, "cgroup.freeze")) {
			c.unified = dir
			// The controllers must be enabled on the way down; in the daemon's own
			// cgroup that fails when processes sit in it (and it is not the root),
			// which is why a delegated subtree is needed.
			// One write each: the kernel refuses a whole write for one
			// controller it cannot enable.
			for _, ctl := range []string{"cpu", "memory", "pids"} {
				for _, d := range []string{filepath.Dir(dir), dir} {
					_ = os.WriteFile(filepath.Join(d, "cgroup.subtree_control"), []byte("+"+ctl), 0)
				}
			}
			on, _ := os.ReadFile(filepath.Join(dir, "cgroup.subtree_control"))
			for _, ctl := range strings.Fields(string(on)) {
				if ctl == "cpu" || ctl == "memory" || ctl == "pids" {
					c.limits[ctl] = dir
				}
			}
		} else {
			c.why = append(c.why, "the cgroup v2 hierarchy lets the daemon make no cgroup with cgroup.kill and cgroup.freeze")
		}
	}
	for _, ctl := range []string{"cpu", "memory", "pids", "freezer"} {
		if _, ok := c.limits[ctl]; ok || ctl == "freezer" && c.unified != "" {
			continue
		}
		m, ok := mounts[ctl]
		if !ok {
			continue
		}
		dir := makeParent(m, self[ctl])
		switch {
		case dir == "":
		case ctl == "freezer":
			c.freezer = dir
		default:
			c.limits[ctl] = dir
		}
	}
	for _, ctl := range []string{"cpu", "memory", "pids"} {
		if _, ok := c.limits[ctl]; !ok {
			c.why = append(c.why, "no usable "+ctl+" controller (neither delegated in cgroup v2 nor a writable v1 hierarchy)")
		}
	}
	if !c.canFreeze() {
		c.why = append(c.why, "no cgroup freezer")
	}
	return c
}

// mount is one mounted cgroup hierarchy: where, and which cgroup is its top.
type mount struct{ dir, root string }

// readMounts maps "cgroup2" and each v1 controller to its mount.
func readMounts() (map[string]mount, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]mount{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// ID parent major:minor root mountpoint options [optional...] - fstype source superoptions
		fields := strings.Fields(sc.Text())
		i := slices.Index(fields, "-")
		if i < 5 || i+3 >= len(fields) {
			continue
		}
		m := mount{dir: fields[4], root: fields[3]}
		switch fields[i+1] {
		case "cgroup2":
			if _, ok := out["cgroup2"]; !ok {
				out["cgroup2"] = m
			}
		case "cgroup":
			for opt := range strings.SplitSeq(fields[i+3], ",") {
				if _, ok := out[opt]; !ok && (opt == "cpu" || opt == "memory" || opt == "pids" || opt == "freezer") {
					out[opt] = m
				}
			}
		}
	}
	return out, sc.Err()
}

// readSelfCgroups maps "" (v2) and each v1 controller to the daemon's cgroup.
func readSelfCgroups() (map[string]string, error) {
	data, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for line := range strings.SplitSeq(string(data), "\n") {
		// hierarchy-ID:controller-list:cgroup-path
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		for ctl := range strings.SplitSeq(parts[1], ",") {
			out[ctl] = parts[2]
		}
	}
	return out, nil
}

// makeParent creates the cgroupRoot child of the daemon's cgroup self in m and
// returns its directory, or "" when it cannot.
func makeParent(m mount, self string) string {
	if self == "" {
		return ""
	}
	rel, err := filepath.Rel(m.root, self)
	if err != nil || strings.HasPrefix(rel, "..") {
		// The daemon's cgroup is not below what is mounted (a container that
		// sees only its own part): that part is the daemon's.
		rel = "."
	}
	dir := filepath.Join(m.dir, rel, cgroupRoot)
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return ""
	}
	// Made by another user's daemon, it may be there but not ours to add to.
	if !exists(filepath.Join(dir, "cgroup.procs")) || syscall.Access(dir, unixWOK) != nil {
		return ""
	}
	return dir
}

// unixWOK is access(2)'s W_OK, which package syscall does not name.
const unixWOK = 0x2

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func (c *cgroups) canFreeze() bool { return c.unified != "" || c.freezer != "" }

// enforces reports whether controller ctl limits sandboxes.
func (c *cgroups) enforces(ctl string) bool {
	_, ok := c.limits[ctl]
	return ok
}

// dirs lists the directories of sandbox name's cgroups, one per hierarchy.
func (c *cgroups) dirs(name string) []string {
	var parents []string
	if c.unified != "" {
		parents = append(parents, c.unified)
	}
	if c.freezer != "" {
		parents = append(parents, c.freezer)
	}
	for _, p := range c.limits {
		parents = append(parents, p)
	}
	slices.Sort(parents)
	parents = slices.Compact(parents)
	out := make([]string, len(parents))
	for i, p := range parents {
		out[i] = filepath.Join(p, name)
	}
	return out
}

// limit is one value written to a cgroup file; optional ones may be absent (swap
// accounting is a kernel option).
type limit struct {
	ctl, v1, v2, value string
	optional           bool
}

// limitsFor is what enforcing r and pidsMax takes.
func limitsFor(r adapters.Resources, pidsMax int) []limit {
	var out []limit
	if pidsMax > 0 {
		out = append(out, limit{ctl: "pids", v1: "pids.max", v2: "pids.max", value: strconv.Itoa(pidsMax)})
	}
	if r.MemoryMiB > 0 {
		b := strconv.FormatInt(r.MemoryMiB<<20, 10)
		out = append(out,
			limit{ctl: "memory", v1: "memory.limit_in_bytes", v2: "memory.max", value: b},
			// Swap would let a sandbox use more than its memory; in v1 memsw is
			// memory plus swap, so the same figure forbids swapping.
			limit{ctl: "memory", v1: "memory.memsw.limit_in_bytes", value: b, optional: true},
			limit{ctl: "memory", v2: "memory.swap.max", value: "0", optional: true})
	}
	if r.CPU > 0 {
		const period = 100000
		quota := max(int64(r.CPU*period), 1000)
		out = append(out,
			limit{ctl: "cpu", v1: "cpu.cfs_period_us", value: strconv.Itoa(period)},
			limit{ctl: "cpu", v1: "cpu.cfs_quota_us", value: strconv.FormatInt(quota, 10)},
			limit{ctl: "cpu", v2: "cpu.max", value: fmt.Sprintf("%d %d", quota, period)})
	}
	return out
}

// ensure creates sandbox name's cgroups and writes its limits. Limits of a
// controller the host does not offer are skipped: CheckResources refused them
// unless the pool accepts unenforced resources.
func (c *cgroups) ensure(name string, r adapters.Resources, pidsMax int) error {
	for _, d := range c.dirs(name) {
		if err := os.Mkdir(d, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("create cgroup: %w", err)
		}
	}
	for _, l := range limitsFor(r, pidsMax) {
		parent, ok := c.limits[l.ctl]
		if !ok {
			continue
		}
		file := l.v1
		if parent == c.unified {
			file = l.v2
		}
		if file == "" {
			continue
		}
		err := os.WriteFile(filepath.Join(parent, name, file), []byte(l.value), 0)
		if err != nil && !(l.optional && errors.Is(err, fs.ErrNotExist)) {
			return fmt.Errorf("set %s: %w", file, err)
		}
	}
	return nil
}

// enter moves the processes pids into sandbox name's cgroups.
func (c *cgroups) enter(name string, pids ...int) error {
	for _, d := range c.dirs(name) {
		for _, pid := range pids {
			if err := os.WriteFile(filepath.Join(d, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0); err != nil {
				return fmt.Errorf("move process %d into %s: %w", pid, d, err)
			}
		}
	}
	return nil
}

// freeze freezes or thaws sandbox name, making its cgroup if no command has yet.
func (c *cgroups) freeze(name string, frozen bool) error {
	switch {
	case c.unified != "":
		d := filepath.Join(c.unified, name)
		if err := os.Mkdir(d, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
		v := "0"
		if frozen {
			v = "1"
		}
		return os.WriteFile(filepath.Join(d, "cgroup.freeze"), []byte(v), 0)
	case c.freezer != "":
		d := filepath.Join(c.freezer, name)
		if err := os.Mkdir(d, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
		v := "THAWED"
		if frozen {
			v = "FROZEN"
		}
		return os.WriteFile(filepath.Join(d, "freezer.state"), []byte(v), 0)
	}
	return errors.New("no cgroup freezer")
}

// drain bounds the wait for a killed cgroup to empty: SIGKILL is delivered at
// once, but a process in uninterruptible sleep dies only when it wakes. What is
// still there is left for the next kill or remove.
const drain = 5 * time.Second

// kill kills every process in sandbox name's cgroups and waits, within drain, for
// them to be gone. A frozen sandbox is thawed after the kill, so that its
// processes can die.
func (c *cgroups) kill(name string) {
	dirs := c.dirs(name)
	for _, d := range dirs {
		if !exists(d) {
			continue
		}
		if d == filepath.Join(c.unified, name) {
			_ = os.WriteFile(filepath.Join(d, "cgroup.kill"), []byte("1"), 0)
		} else {
			killProcs(d)
		}
	}
	if c.unified != "" && exists(filepath.Join(c.unified, name)) || c.freezer != "" && exists(filepath.Join(c.freezer, name)) {
		_ = c.freeze(name, false)
	}
	deadline := time.Now().Add(drain)
	for _, d := range dirs {
		for populated(d) && time.Now().Before(deadline) {
			killProcs(d) // a v1 hierarchy has no cgroup.kill: what forked meanwhile
			time.Sleep(time.Millisecond)
		}
	}
}

// killProcs signals every process listed in d.
func killProcs(d string) {
	data, _ := os.ReadFile(filepath.Join(d, "cgroup.procs"))
	for f := range bytes.FieldsSeq(data) {
		if pid, err := strconv.Atoi(string(f)); err == nil && pid > 0 {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

func populated(d string) bool {
	data, err := os.ReadFile(filepath.Join(d, "cgroup.procs"))
	return err == nil && len(bytes.TrimSpace(data)) > 0
}

// remove removes sandbox name's cgroups; one still populated stays.
func (c *cgroups) remove(name string) {
	for _, d := range c.dirs(name) {
		_ = syscall.Rmdir(d)
	}
}

// frozen reports whether sandbox name's cgroup says it is frozen.
func (c *cgroups) frozen(name string) bool {
	switch {
	case c.unified != "":
		data, _ := os.ReadFile(filepath.Join(c.unified, name, "cgroup.events"))
		return bytes.Contains(data, []byte("frozen 1"))
	case c.freezer != "":
		data, _ := os.ReadFile(filepath.Join(c.freezer, name, "freezer.state"))
		return strings.TrimSpace(string(data)) == "FROZEN"
	}
	return false
}
