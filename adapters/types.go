package adapters

import (
	"strings"
	"time"

	"github.com/different-ai/differently/api"
)

// Info describes an adapter. It is static: Info does no I/O.
type Info struct {
	// Kind names the adapter implementation ("opensandbox", "devhost", "lab-fleet").
	Kind    string `json:"kind"`
	Version string `json:"version,omitempty"`
	// Trust is the adapter's claim; the operator's pool setting overrides it.
	Trust api.Trust `json:"trust"`
	// Isolation describes, in words, what separates sandboxes from each other and the host.
	Isolation string `json:"isolation"`
	// Protocol is the contract version the adapter implements: ProtocolVersion.
	Protocol string `json:"protocol"`
	// Description documents deviations from the contract (combined output, no stdin).
	Description string `json:"description,omitempty"`
}

// Capabilities are an adapter's declared features and limits.
type Capabilities struct {
	Features []string `json:"features"`
	// Limits per sandbox; 0 means no limit.
	MaxCPU       float64 `json:"maxCPU,omitempty"`
	MaxMemoryMiB int64   `json:"maxMemoryMiB,omitempty"`
	MaxDiskGiB   int64   `json:"maxDiskGiB,omitempty"`
	// Templates the adapter accepts; empty means any.
	Templates []string `json:"templates,omitempty"`
	// Regions the adapter places instances in; empty means unspecified.
	Regions []string `json:"regions,omitempty"`
}

// Resources a sandbox asks for. Zero values mean the backend's default.
type Resources struct {
	CPU       float64 `json:"cpu,omitempty"`
	MemoryMiB int64   `json:"memoryMiB,omitempty"`
	DiskGiB   int64   `json:"diskGiB,omitempty"`
}

// Validate rejects negative values and values above the bounds of api/limits.go,
// naming the field.
func (r Resources) Validate() error {
	switch {
	// Written so that a NaN fails too.
	case !(r.CPU >= 0 && r.CPU <= api.MaxCPU):
		return InvalidRequest("resources.cpu must be between 0 and %d", api.MaxCPU)
	case r.MemoryMiB < 0 || r.MemoryMiB > api.MaxMemoryMiB:
		return InvalidRequest("resources.memoryMiB must be between 0 and %d (16 TiB)", api.MaxMemoryMiB)
	case r.DiskGiB < 0 || r.DiskGiB > api.MaxDiskGiB:
		return InvalidRequest("resources.diskGiB must be between 0 and %d (1 PiB)", api.MaxDiskGiB)
	}
	return nil
}

// InstanceState is the backend's view of an instance.
type InstanceState string

const (
	StatePending InstanceState = "pending"
	StateRunning InstanceState = "running"
	StateStopped InstanceState = "stopped"
	StatePaused  InstanceState = "paused"
	StateError   InstanceState = "error"
)

// Instance is the backend resource behind one sandbox.
type Instance struct {
	// Ref is the adapter's own identifier, opaque to the control plane.
	Ref       string        `json:"ref"`
	SandboxID string        `json:"sandboxId"`
	State     InstanceState `json:"state"`
	Region    string        `json:"region,omitempty"`
	// Message explains an error state, in the backend's words.
	Message string `json:"message,omitempty"`
}

// CreateRequest asks for the instance of one sandbox.
type CreateRequest struct {
	// ID is the sandbox ID and the idempotency key.
	ID string `json:"id"`
	// Installation is the control plane's installation ID; List filters by it.
	Installation string            `json:"installation"`
	Template     string            `json:"template,omitempty"`
	Resources    Resources         `json:"resources"`
	Env          map[string]string `json:"env,omitempty"`
	// TTLSeconds lets backends with their own expiry set a backstop; 0 means none.
	TTLSeconds int64 `json:"ttlSeconds,omitempty"`
	// FromSnapshot is a snapshot ref from this same adapter to restore from.
	FromSnapshot string `json:"fromSnapshot,omitempty"`
	// Labels to stamp on the instance, ownership labels included.
	Labels map[string]string `json:"labels,omitempty"`
}

// Validate checks what every adapter needs of a request.
func (r CreateRequest) Validate() error {
	if r.ID == "" {
		return InvalidRequest("create request needs an id")
	}
	if r.Installation == "" {
		return InvalidRequest("create request needs an installation")
	}
	if r.TTLSeconds < 0 {
		return InvalidRequest("ttlSeconds must not be negative")
	}
	for k, v := range r.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return InvalidRequest("env name %q is not valid", k)
		}
		if strings.ContainsRune(v, 0) {
			return InvalidRequest("env value of %q contains a NUL byte", k)
		}
	}
	return r.Resources.Validate()
}

// SnapshotKind says what a snapshot captures.
type SnapshotKind string

const (
	SnapshotDisk   SnapshotKind = "disk"
	SnapshotMemory SnapshotKind = "memory"
)

// Validate accepts the two kinds.
func (k SnapshotKind) Validate() error {
	if k != SnapshotDisk && k != SnapshotMemory {
		return InvalidRequest("snapshot kind must be %q or %q, not %q", SnapshotDisk, SnapshotMemory, string(k))
	}
	return nil
}

// Snapshot is a captured instance, restorable on the same adapter.
type Snapshot struct {
	Ref       string       `json:"ref"`
	Kind      SnapshotKind `json:"kind"`
	SizeBytes int64        `json:"sizeBytes"`
}

// FileInfo is one directory entry. Backends that know less leave fields zero.
type FileInfo struct {
	Name    string    `json:"name"`
	Path    string    `json:"path"`
	Size    int64     `json:"size"`
	IsDir   bool      `json:"isDir"`
	Mode    uint32    `json:"mode,omitempty"`
	ModTime time.Time `json:"modTime,omitzero"`
}
