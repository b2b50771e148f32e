package devhost

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/different-ai/differently/adapters"
)

// meta is the on-disk record of one instance. Its presence is what makes a sandbox
// directory exist.
type meta struct {
	SandboxID    string                 `json:"sandboxId"`
	Installation string                 `json:"installation"`
	Labels       map[string]string      `json:"labels,omitempty"`
	Env          map[string]string      `json:"env,omitempty"`
	Template     string                 `json:"template,omitempty"`
	Resources    adapters.Resources     `json:"resources"`
	TTLSeconds   int64                  `json:"ttlSeconds,omitempty"`
	FromSnapshot string                 `json:"fromSnapshot,omitempty"`
	State        adapters.InstanceState `json:"state"`
	CreatedAt    time.Time              `json:"createdAt"`
}

func (m *meta) instance() adapters.Instance {
	return adapters.Instance{Ref: m.SandboxID, SandboxID: m.SandboxID, State: m.State}
}

const metaFile = "meta.json"

// errNoMeta marks a directory that does not (or no longer, or not yet) hold a valid
// record. Callers treat it as "instance does not exist".
var errNoMeta = errors.New("no valid instance record")

// readMeta loads the record of sandbox id. A missing or malformed record, or one
// naming another sandbox, is errNoMeta: records are only ever replaced atomically, so
// anything else is debris from a crash or from outside hands. Other read failures are
// real I/O errors and are returned as they are, so List can refuse to answer.
func (a *Adapter) readMeta(id string) (*meta, error) {
	b, err := os.ReadFile(filepath.Join(a.sandboxDir(id), metaFile))
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return nil, errNoMeta
	}
	if err != nil {
		return nil, err
	}
	var m meta
	if json.Unmarshal(b, &m) != nil || m.SandboxID != id || m.Installation == "" ||
		(m.State != adapters.StateRunning && m.State != adapters.StateStopped && (m.State != adapters.StatePaused || a.jail == nil)) {
		return nil, errNoMeta
	}
	return &m, nil
}

// loadMeta is readMeta for callers holding a ref: a missing instance is not_found and
// an I/O failure provider_unavailable.
func (a *Adapter) loadMeta(ref string) (*meta, error) {
	if !validID(ref) {
		return nil, adapters.NotFound("devhost: instance %q not found", ref)
	}
	m, err := a.readMeta(ref)
	if errors.Is(err, errNoMeta) {
		return nil, adapters.NotFound("devhost: instance %q not found", ref)
	}
	if err != nil {
		return nil, adapters.Unavailable("devhost: read instance %s: %v", ref, err)
	}
	return m, nil
}

// writeJSONAtomic writes v to dir/name through a synced temporary file and a rename,
// so a reader (or a crash) sees either the old content or the new, never a mix.
func writeJSONAtomic(dir, name string, v any, perm os.FileMode) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, "."+name+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(b)
	if err == nil {
		err = f.Chmod(perm)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(dir, name))
	}
	if err != nil {
		_ = os.Remove(tmp)
	}
	return err
}

// stagingName returns a unique sibling name for assembling a directory before it is
// renamed into place. The leading dot keeps it outside the ID alphabet, so List and
// Get can never mistake it for an instance.
func stagingName(dir, id string) string {
	return filepath.Join(dir, ".staging-"+id+"-"+randomSuffix())
}

func randomSuffix() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Create implements adapters.ExecutionAdapter.
func (a *Adapter) Create(ctx context.Context, req adapters.CreateRequest) (_ adapters.Instance, err error) {
	defer a.rename(&err)
	if err := req.Validate(); err != nil {
		return adapters.Instance{}, err
	}
	if !validID(req.ID) {
		return adapters.Instance{}, adapters.InvalidRequest(
			"devhost: sandbox id %q must be 1 to %d characters of letters, digits, _ and -", req.ID, maxIDLen)
	}
	if req.Template != "" && req.Template != a.template() {
		return adapters.Instance{}, adapters.InvalidRequest(
			"devhost: template %q is not offered; the only one is %q (or none)", req.Template, a.template())
	}
	if a.jail != nil && !a.ignoreResources {
		if err := a.jail.CheckResources(req.Resources); err != nil {
			return adapters.Instance{}, err
		}
	} else if r := req.Resources; r != (adapters.Resources{}) && !a.ignoreResources {
		return adapters.Instance{}, adapters.InvalidRequest(
			"devhost: cannot apply resources (cpu %g, memoryMiB %d, diskGiB %d): its commands are unlimited host processes; "+
				"ask for none, or set ignoreResources in the pool's config to accept them for quota and cost only",
			r.CPU, r.MemoryMiB, r.DiskGiB)
	}
	if req.FromSnapshot != "" && !validID(req.FromSnapshot) {
		return adapters.Instance{}, adapters.InvalidRequest("devhost: snapshot %q does not exist", req.FromSnapshot)
	}
	if err := ctx.Err(); err != nil {
		return adapters.Instance{}, contextError(err)
	}
	unlock := a.locks.lock("sbx:" + req.ID)
	defer unlock()

	m, err := a.readMeta(req.ID)
	switch {
	case err == nil:
		return m.instance(), nil
	case !errors.Is(err, errNoMeta):
		return adapters.Instance{}, adapters.Unavailable("devhost: read instance %s: %v", req.ID, err)
	}

	m = &meta{
		SandboxID:    req.ID,
		Installation: req.Installation,
		Labels:       adapters.OwnershipLabels(req.Labels, req.ID, req.Installation),
		Env:          maps.Clone(req.Env),
		Template:     req.Template,
		Resources:    req.Resources,
		TTLSeconds:   req.TTLSeconds,
		FromSnapshot: req.FromSnapshot,
		State:        adapters.StateRunning,
		CreatedAt:    a.now().UTC(),
	}
	stage := stagingName(a.sandboxesDir(), req.ID)
	if err := a.assemble(stage, m); err != nil {
		_ = removeTree(stage)
		return adapters.Instance{}, err
	}
	final := a.sandboxDir(req.ID)
	// Whatever sits under the final name has no valid record (checked above, under
	// the lock), so it is crash debris and may go.
	if err := removeTree(final); err != nil {
		_ = removeTree(stage)
		return adapters.Instance{}, adapters.Unavailable("devhost: clear leftover directory for %s: %v", req.ID, err)
	}
	if err := os.Rename(stage, final); err != nil {
		_ = removeTree(stage)
		return adapters.Instance{}, adapters.Unavailable("devhost: create instance %s: %v", req.ID, err)
	}
	return m.instance(), nil
}

// assemble builds a complete sandbox directory at stage: the file tree (empty or
// copied from the snapshot) first, the record last.
func (a *Adapter) assemble(stage string, m *meta) error {
	if err := os.Mkdir(stage, 0o700); err != nil {
		return adapters.Unavailable("devhost: create instance %s: %v", m.SandboxID, err)
	}
	fsDir := filepath.Join(stage, "fs")
	if m.FromSnapshot == "" {
		if err := os.Mkdir(fsDir, 0o755); err != nil {
			return adapters.Unavailable("devhost: create instance %s: %v", m.SandboxID, err)
		}
	} else {
		// Held so DeleteSnapshot cannot pull the tree out from under the copy.
		unlock := a.locks.lock("snap:" + m.FromSnapshot)
		defer unlock()
		if _, err := a.readSnapshotMeta(m.FromSnapshot); err != nil {
			return err
		}
		if _, err := copyTree(filepath.Join(a.snapshotsDir(), m.FromSnapshot, "fs"), fsDir); err != nil {
			return adapters.Unavailable("devhost: restore snapshot %s: %v", m.FromSnapshot, err)
		}
	}
	if err := writeJSONAtomic(stage, metaFile, m, 0o600); err != nil {
		return adapters.Unavailable("devhost: write instance record %s: %v", m.SandboxID, err)
	}
	return nil
}

// Get implements adapters.ExecutionAdapter.
func (a *Adapter) Get(_ context.Context, ref string) (_ adapters.Instance, err error) {
	defer a.rename(&err)
	m, err := a.loadMeta(ref)
	if err != nil {
		return adapters.Instance{}, err
	}
	return m.instance(), nil
}

// List implements adapters.ExecutionAdapter. Any directory it cannot read fails the
// whole call: the reconciler would take a missing instance for a lost one.
func (a *Adapter) List(ctx context.Context, installation string) (_ []adapters.Instance, err error) {
	defer a.rename(&err)
	entries, err := os.ReadDir(a.sandboxesDir())
	if err != nil {
		return nil, adapters.Unavailable("devhost: list instances: %v", err)
	}
	out := []adapters.Instance{}
	for _, e := range entries {
		if err := ctx.Err(); err != nil {
			return nil, contextError(err)
		}
		if !validID(e.Name()) {
			continue // staging directories and probe files
		}
		m, err := a.readMeta(e.Name())
		if errors.Is(err, errNoMeta) {
			continue
		}
		if err != nil {
			return nil, adapters.Unavailable("devhost: list instances: read %s: %v", e.Name(), err)
		}
		if m.Installation == installation {
			out = append(out, m.instance())
		}
	}
	return out, nil
}

// Delete implements adapters.ExecutionAdapter. A ref that is not a valid ID names no
// instance, so deleting it succeeds like deleting any other missing instance.
func (a *Adapter) Delete(_ context.Context, ref string) (err error) {
	defer a.rename(&err)
	if !validID(ref) {
		return nil
	}
	err = a.delete(ref)
	// After the lock on ref is released: pruneCgroups takes other sandboxes' locks,
	// and holding two at once could deadlock with a Delete of one of those.
	a.pruneCgroups()
	return err
}

// pruneCgroups removes the cgroups of sandboxes that no longer exist. A Delete
// whose cgroup did not empty within cgroupDrain leaves it behind, and nothing else
// would look at it again. Each is checked and removed under its sandbox's lock, so
// that a sandbox created again under the same ID keeps its commands' cgroup.
func (a *Adapter) pruneCgroups() {
	for _, id := range a.track.cgroupIDs() {
		if !validID(id) {
			continue
		}
		unlock := a.locks.lock("sbx:" + id)
		if _, err := a.readMeta(id); errors.Is(err, errNoMeta) {
			a.track.dropCgroup(id)
		}
		unlock()
	}
}

func (a *Adapter) delete(ref string) error {
	unlock := a.locks.lock("sbx:" + ref)
	defer unlock()
	a.procs.killAll(ref, adapters.NotFound("devhost: instance %q was deleted while the command ran", ref))
	// What the commands left running, also outside their process groups, and what
	// a daemon that ran before this one left.
	a.killSandbox(ref)
	if a.jail != nil {
		a.jail.Remove(ref)
	}
	dir := a.sandboxDir(ref)
	// The record goes first: if removing the tree fails halfway, what is left is
	// already "not existing" instead of an instance with half its files.
	if err := os.Remove(filepath.Join(dir, metaFile)); err != nil && !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR) {
		return adapters.Unavailable("devhost: delete instance %s: %v", ref, err)
	}
	if err := removeTree(dir); err != nil {
		return adapters.Unavailable("devhost: delete instance %s: %v", ref, err)
	}
	return nil
}

// Stop implements adapters.Lifecycle. The instance has no process of its own, so
// stopping means refusing new execs and killing the running ones.
func (a *Adapter) Stop(_ context.Context, ref string) (err error) {
	defer a.rename(&err)
	return a.setState(ref, adapters.StateStopped)
}

// Start implements adapters.Lifecycle.
func (a *Adapter) Start(_ context.Context, ref string) (err error) {
	defer a.rename(&err)
	return a.setState(ref, adapters.StateRunning)
}

func (a *Adapter) setState(ref string, state adapters.InstanceState) error {
	if !validID(ref) {
		return adapters.NotFound("devhost: instance %q not found", ref)
	}
	unlock := a.locks.lock("sbx:" + ref)
	defer unlock()
	m, err := a.loadMeta(ref)
	if err != nil {
		return err
	}
	wasPaused := m.State == adapters.StatePaused
	if m.State != state {
		m.State = state
		if err := writeJSONAtomic(a.sandboxDir(ref), metaFile, m, 0o600); err != nil {
			return adapters.Unavailable("devhost: write instance record %s: %v", ref, err)
		}
	}
	if state == adapters.StateStopped {
		// Also on an already stopped instance: killing is idempotent and cheap.
		a.procs.killAll(ref, adapters.InvalidState("devhost: instance %q was stopped while the command ran", ref))
		a.killSandbox(ref)
	}
	if wasPaused && a.jail != nil {
		// Start resumes a paused sandbox; after Stop's kill, thawing lets the
		// killed processes (a v1 freezer holds them) finish dying.
		_ = a.jail.Freeze(ref, false)
	}
	return nil
}

// killSandbox ends every process of sandbox ref, its commands' leftovers included.
func (a *Adapter) killSandbox(ref string) {
	if a.jail != nil {
		a.jail.Kill(ref)
		return
	}
	a.track.killSandbox(ref, a.fsDir(ref))
}

// SetPaused pauses (freezes every process of) or resumes sandbox ref, for an
// adapter whose Jail can freeze; see package local. A paused sandbox refuses
// execs; Stop and Delete still work, and Start resumes it. Both directions are
// idempotent; pausing a stopped sandbox is invalid_state.
func (a *Adapter) SetPaused(ref string, paused bool) (err error) {
	defer a.rename(&err)
	if a.jail == nil {
		return adapters.Unsupported("pause")
	}
	if !validID(ref) {
		return adapters.NotFound("devhost: instance %q not found", ref)
	}
	unlock := a.locks.lock("sbx:" + ref)
	defer unlock()
	m, err := a.loadMeta(ref)
	if err != nil {
		return err
	}
	want := adapters.StateRunning
	if paused {
		want = adapters.StatePaused
	}
	switch {
	case m.State == want:
		return nil
	case m.State != adapters.StateRunning && m.State != adapters.StatePaused:
		return adapters.InvalidState("devhost: instance %q is %s", ref, m.State)
	}
	if err := a.jail.Freeze(ref, paused); err != nil {
		return err
	}
	m.State = want
	if err := writeJSONAtomic(a.sandboxDir(ref), metaFile, m, 0o600); err != nil {
		// Not left frozen behind a record that says running, nor the other way.
		_ = a.jail.Freeze(ref, !paused)
		return adapters.Unavailable("devhost: write instance record %s: %v", ref, err)
	}
	return nil
}

// removeTree is os.RemoveAll that also copes with read-only directories, which
// sandbox code creates routinely (Go's module cache, for one). Missing is success.
func removeTree(path string) error {
	err := os.RemoveAll(path)
	if err == nil || !errors.Is(err, fs.ErrPermission) {
		return err
	}
	_ = filepath.WalkDir(path, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			_ = os.Chmod(p, 0o700)
		}
		return nil
	})
	return os.RemoveAll(path)
}

// keyedMutex hands out one mutex per key, dropping entries nobody holds, so that
// operations on different sandboxes never wait for each other.
type keyedMutex struct {
	mu sync.Mutex
	m  map[string]*keyedEntry
}

type keyedEntry struct {
	mu   sync.Mutex
	refs int
}

func (k *keyedMutex) lock(key string) (unlock func()) {
	k.mu.Lock()
	if k.m == nil {
		k.m = make(map[string]*keyedEntry)
	}
	e := k.m[key]
	if e == nil {
		e = &keyedEntry{}
		k.m[key] = e
	}
	e.refs++
	k.mu.Unlock()

	e.mu.Lock()
	return func() {
		e.mu.Unlock()
		k.mu.Lock()
		e.refs--
		if e.refs == 0 {
			delete(k.m, key)
		}
		k.mu.Unlock()
	}
}
