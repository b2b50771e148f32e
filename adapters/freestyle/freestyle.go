package freestyle

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/adapters/httpx"
	"github.com/different-ai/differently/api"
)

// Kind is the adapter kind reported by Info.
const Kind = "freestyle"

// Metadata keys stamped on every VM. Freestyle metadata keys and values hold at most
// 63 characters, so the ownership labels get short names of their own.
const (
	MetaInstallation = "dly-installation"
	MetaSandboxID    = "dly-sandbox-id"
	maxMetaLen       = 63
	maxMetaEntries   = 64
)

// Per-sandbox limits reported in Capabilities (Freestyle's largest plan).
const (
	MaxCPU       = 32
	MaxMemoryMiB = 64 << 10
	MaxDiskGiB   = 256
)

// Adapter runs sandboxes as Freestyle VMs. All methods are safe for concurrent use.
type Adapter struct {
	cfg  Config
	c    *httpx.Client
	poll time.Duration
}

var (
	_ adapters.ExecutionAdapter = (*Adapter)(nil)
	_ adapters.FileSystem       = (*Adapter)(nil)
	_ adapters.Lifecycle        = (*Adapter)(nil)
	_ adapters.Pauser           = (*Adapter)(nil)
	_ adapters.Snapshotter      = (*Adapter)(nil)
	_ adapters.PortExposer      = (*Adapter)(nil)
	_ adapters.TTLRenewer       = (*Adapter)(nil)
)

// Config returns the adapter's configuration, defaults filled in.
func (a *Adapter) Config() Config { return a.cfg }

// Info claims external trust: Freestyle is a third party's infrastructure, whatever
// the pool says.
func (a *Adapter) Info() adapters.Info {
	return adapters.Info{
		Kind:      Kind,
		Version:   "v5",
		Trust:     api.TrustExternal,
		Isolation: "hardware-virtualized microVM per sandbox (provider-managed)",
		Protocol:  adapters.ProtocolVersion,
		Description: "exec timeouts are capped at 300 s (also the default); env names must be shell identifiers; " +
			"no streamed exec; snapshots always hold memory and disk; exposed ports are public URLs; " +
			"labels that do not fit Freestyle metadata (63 characters, 64 entries) are not stored",
	}
}

// Capabilities declares what Freestyle VMs offer. Egress control only where the pool
// closes the firewall: a pool with public egress lets every VM reach anywhere, and a
// tenant who asked for network.egress-control must not be placed there.
func (a *Adapter) Capabilities(context.Context) (adapters.Capabilities, error) {
	features := []string{
		adapters.FeatureExec, adapters.FeatureFiles,
		adapters.FeatureStopStart, adapters.FeaturePersistenceDisk, adapters.FeaturePauseResume,
		adapters.FeatureSnapshotsMemory, adapters.FeatureSnapshotsDisk, adapters.FeatureFork,
		adapters.FeaturePortsExpose, adapters.FeatureMicroVM,
	}
	if a.cfg.Egress != EgressPublic {
		features = append(features, adapters.FeatureEgressControl)
	}
	return adapters.Capabilities{
		Features: features,
		MaxCPU:   MaxCPU, MaxMemoryMiB: MaxMemoryMiB, MaxDiskGiB: MaxDiskGiB,
	}, nil
}

// Capacity is unbounded: Freestyle reports none, so the pool's maxConcurrency governs.
func (a *Adapter) Capacity(context.Context) (adapters.Capacity, error) {
	return adapters.Capacity{Bounded: false}, nil
}

// Health lists one VM, which needs a reachable API and an accepted key.
func (a *Adapter) Health(ctx context.Context) error {
	return a.c.JSON(ctx, http.MethodGet, "/v5/vms", url.Values{"limit": {"1"}}, nil, nil)
}

// vmData is Freestyle's VM record.
type vmData struct {
	ID          string            `json:"id"`
	State       string            `json:"state"`
	Slug        string            `json:"slug"`
	DisplayName string            `json:"displayName"`
	Resources   resources         `json:"resources"`
	SnapshotID  string            `json:"snapshotId"`
	Metadata    map[string]string `json:"metadata"`
	// CreatedAt stays a string: a format we did not expect must not fail every read.
	CreatedAt string `json:"createdAt"`
}

type resources struct {
	CPU     int64 `json:"cpu"`
	Memory  int64 `json:"memory"`
	Storage int64 `json:"storage"`
}

func (vm vmData) instance() adapters.Instance {
	inst := adapters.Instance{Ref: vm.ID, SandboxID: vm.Metadata[MetaSandboxID]}
	switch vm.State {
	case "running":
		inst.State = adapters.StateRunning
	case "starting":
		inst.State = adapters.StatePending
	case "paused", "pausing":
		inst.State = adapters.StatePaused
	case "stopped":
		inst.State = adapters.StateStopped
	default:
		// An unknown state is most likely a transition added after these notes were
		// written; pending keeps the reconciler from failing the sandbox over it.
		inst.State = adapters.StatePending
		inst.Message = "freestyle state " + vm.State
	}
	return inst
}

// Slug derives the VM slug from a sandbox ID: "dly-", the ID lowercased with every
// character outside [a-z0-9-] turned into "-" (cut to 42 characters), "-", and the
// first 10 hex digits of the ID's SHA-256. It is deterministic, so a retried Create
// asks for the same slug and Freestyle's uniqueness check finds the first VM. The hash
// keeps IDs that differ only in case or punctuation apart. At most 57 characters, so
// that "<port>-<slug>" still fits one 63-character DNS label.
func Slug(sandboxID string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(sandboxID) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' {
			b.WriteRune(r)
		} else {
			b.WriteByte('-')
		}
	}
	readable := b.String()
	if len(readable) > 42 {
		readable = readable[:42]
	}
	sum := sha256.Sum256([]byte(sandboxID))
	return "dly-" + readable + "-" + hex.EncodeToString(sum[:])[:10]
}

// metadata stamps the ownership entries and keeps the tenant labels that fit
// Freestyle's limits, in key order; the rest are dropped (documented).
func metadata(req adapters.CreateRequest) (map[string]string, error) {
	if len(req.ID) > maxMetaLen || len(req.Installation) > maxMetaLen {
		return nil, adapters.InvalidRequest("freestyle: sandbox and installation IDs must fit %d characters of metadata", maxMetaLen)
	}
	meta := map[string]string{MetaInstallation: req.Installation, MetaSandboxID: req.ID}
	keys := make([]string, 0, len(req.Labels))
	for k := range req.Labels {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if k == adapters.LabelSandboxID || k == adapters.LabelInstallation {
			continue // stamped above from the request itself
		}
		name := k
		if adapters.IsReservedLabel(k) {
			name = "dly-" + strings.TrimPrefix(k, adapters.ReservedLabelPrefix)
		}
		v := req.Labels[k]
		if _, taken := meta[name]; taken || len(name) > maxMetaLen || len(v) > maxMetaLen || len(meta) >= maxMetaEntries {
			continue
		}
		meta[name] = v
	}
	return meta, nil
}

type createBody struct {
	SnapshotID         string            `json:"snapshotId,omitempty"`
	Slug               string            `json:"slug"`
	DisplayName        string            `json:"displayName"`
	IdleTimeoutSeconds int64             `json:"idleTimeoutSeconds"`
	TTLSeconds         int64             `json:"ttlSeconds,omitempty"`
	Metadata           map[string]string `json:"metadata"`
	Firewall           firewall          `json:"firewall"`
}

type firewall struct {
	Rules []firewallRule `json:"rules"`
}

type firewallRule struct {
	Action      string `json:"action"`
	Destination string `json:"destination"`
}

// firewall is the create body's rule set. The notes give only {rules}; an empty list
// is taken to allow nothing out, and public egress allows every address.
func (a *Adapter) firewall() firewall {
	if a.cfg.Egress == EgressPublic {
		return firewall{Rules: []firewallRule{{"allow", "0.0.0.0/0"}, {"allow", "::/0"}}}
	}
	return firewall{Rules: []firewallRule{}}
}

// Create makes the VM for req.ID, or finds the one an earlier call made: the slug is
// derived from the sandbox ID, so a second POST answers 409 and the VM is read back by
// slug. Either way the VM is then brought to the requested shape (running, resources
// grown, env file written), steps that are safe to repeat.
func (a *Adapter) Create(ctx context.Context, req adapters.CreateRequest) (adapters.Instance, error) {
	if err := req.Validate(); err != nil {
		return adapters.Instance{}, err
	}
	if err := checkEnvNames(req.Env); err != nil {
		return adapters.Instance{}, err
	}
	r := req.Resources
	if r.CPU > MaxCPU || r.MemoryMiB > MaxMemoryMiB || r.DiskGiB > MaxDiskGiB {
		return adapters.Instance{}, adapters.InvalidRequest("freestyle: at most %d vCPU, %d MiB memory and %d GiB disk per sandbox", MaxCPU, MaxMemoryMiB, MaxDiskGiB)
	}
	meta, err := metadata(req)
	if err != nil {
		return adapters.Instance{}, err
	}
	source := a.cfg.Snapshot
	switch {
	case req.FromSnapshot != "":
		source = req.FromSnapshot
	case req.Template != "":
		source = req.Template
	}
	slug := Slug(req.ID)
	body := createBody{SnapshotID: source, Slug: slug, DisplayName: req.ID, IdleTimeoutSeconds: -1,
		TTLSeconds: req.TTLSeconds, Metadata: meta, Firewall: a.firewall()}
	var vm vmData
	err = a.c.JSON(ctx, http.MethodPost, "/v5/vms", nil, body, &vm)
	switch {
	case err == nil:
	case api.IsCode(err, api.CodeInvalidState):
		// The slug is taken: by this sandbox's VM from an earlier attempt, unless the
		// metadata says otherwise.
		if vm, err = a.get(ctx, slug); err != nil {
			return adapters.Instance{}, err
		}
		if vm.Metadata[MetaSandboxID] != req.ID {
			// Retrying cannot free the slug, and in Create anything but invalid_request
			// would mark the pool unhealthy for one sandbox's clash.
			return adapters.Instance{}, adapters.InvalidRequest("freestyle: slug %s belongs to VM %s of another sandbox", slug, vm.ID)
		}
	case api.IsCode(err, api.CodeNotFound) && source != "":
		return adapters.Instance{}, adapters.InvalidRequest("freestyle: snapshot %q does not exist", source)
	default:
		return adapters.Instance{}, err
	}
	return a.finish(ctx, vm.ID, req)
}

// finish waits for the VM to run, grows its resources and writes its env file.
func (a *Adapter) finish(ctx context.Context, ref string, req adapters.CreateRequest) (adapters.Instance, error) {
	vm, err := a.settle(ctx, ref, "running", "starting")
	if err != nil {
		if api.IsCode(err, api.CodeInvalidState) {
			return adapters.Instance{}, adapters.SandboxFailed("freestyle: VM %s did not come up: %s", ref, api.AsError(err).Message)
		}
		return adapters.Instance{}, err
	}
	if grew, err := a.grow(ctx, vm, req.Resources); err != nil {
		return adapters.Instance{}, err
	} else if grew {
		if vm, err = a.settle(ctx, ref, "running", "starting"); err != nil {
			return adapters.Instance{}, err
		}
	}
	if err := a.writeEnv(ctx, ref, req.Env); err != nil {
		return adapters.Instance{}, err
	}
	return vm.instance(), nil
}

// grow resizes the VM to at least the requested resources. Freestyle only grows, so
// a request smaller than the snapshot's size keeps the snapshot's.
func (a *Adapter) grow(ctx context.Context, vm vmData, r adapters.Resources) (bool, error) {
	body := map[string]int64{}
	if cpu := int64(math.Ceil(r.CPU)); cpu > vm.Resources.CPU {
		body["cpu"] = cpu
	}
	if r.MemoryMiB > vm.Resources.Memory {
		body["memory"] = r.MemoryMiB
	}
	if mib := r.DiskGiB << 10; mib > vm.Resources.Storage {
		body["storage"] = mib
	}
	if len(body) == 0 {
		return false, nil
	}
	return true, a.c.JSON(ctx, http.MethodPost, vmPath(vm.ID, "resize"), nil, body, nil)
}

// settle polls the VM until it is in want, passing through the states in via. Any
// other state is invalid_state. The caller's ctx bounds the wait; a VM still on its
// way when it ends is sandbox_failed (httpx.WaitState).
func (a *Adapter) settle(ctx context.Context, ref, want string, via ...string) (vmData, error) {
	var vm vmData
	still := func() string { return fmt.Sprintf("freestyle: VM %s was still %s, not %s", ref, vm.State, want) }
	err := httpx.WaitState(ctx, a.poll, still, func(ctx context.Context) (bool, error) {
		got, err := a.get(ctx, ref)
		if err != nil {
			return false, err
		}
		vm = got
		switch {
		case vm.State == want:
			return true, nil
		case slices.Contains(via, vm.State):
			return false, nil
		}
		return false, adapters.InvalidState("freestyle: VM %s is %s, not %s", ref, vm.State, want)
	})
	return vm, err
}

// vmPath is the path of a VM or of one of its actions. Refs come from Freestyle but
// pass through callers; escaping keeps one from naming another path.
func vmPath(ref string, action ...string) string {
	return strings.Join(append([]string{"/v5/vms", url.PathEscape(ref)}, action...), "/")
}

// validRef rejects refs that no Freestyle VM has: empty, or holding URL syntax.
func validRef(ref string) bool { return ref != "" && !strings.ContainsAny(ref, "/?#%") }

func (a *Adapter) get(ctx context.Context, ref string) (vmData, error) {
	var vm vmData
	if !validRef(ref) {
		return vm, adapters.NotFound("freestyle: no VM %q", ref)
	}
	err := a.c.JSON(ctx, http.MethodGet, vmPath(ref), nil, nil, &vm)
	return vm, err
}

// Get returns the VM's instance, or not_found.
func (a *Adapter) Get(ctx context.Context, ref string) (adapters.Instance, error) {
	vm, err := a.get(ctx, ref)
	if err != nil {
		return adapters.Instance{}, err
	}
	return vm.instance(), nil
}

// Delete removes the VM's public routes, then the VM; a missing VM is a success.
// The routes go first and at best effort: a failure to list or remove them must not
// keep a VM, which costs money, alive, and no answer about them may pass for the
// VM's own (a not_found from Delete would have the caller take the VM for gone).
func (a *Adapter) Delete(ctx context.Context, ref string) error {
	if !validRef(ref) {
		return nil // no VM can have this ref
	}
	_ = a.deleteTLSRules(ctx, ref)
	err := a.c.JSON(ctx, http.MethodDelete, vmPath(ref), nil, nil, nil)
	if api.IsCode(err, api.CodeNotFound) {
		return nil
	}
	return err
}
