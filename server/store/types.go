package store

import (
	"time"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/api"
)

// State is a sandbox's lifecycle state as the control plane sees it.
type State string

// The sandbox states of the public API.
const (
	StateQueued       State = "queued"
	StateProvisioning State = "provisioning"
	StateRunning      State = "running"
	StateStopped      State = "stopped"
	StatePaused       State = "paused"
	StateTerminating  State = "terminating"
	StateTerminated   State = "terminated"
	StateFailed       State = "failed"
)

// States lists every state, in lifecycle order.
var States = []State{StateQueued, StateProvisioning, StateRunning, StateStopped, StatePaused,
	StateTerminating, StateTerminated, StateFailed}

// NonTerminalStates lists the states in which a sandbox may still own a backend instance.
var NonTerminalStates = []State{StateQueued, StateProvisioning, StateRunning, StateStopped,
	StatePaused, StateTerminating}

// IsTerminal reports whether the sandbox is finished for good (terminated or failed).
func (s State) IsTerminal() bool { return s == StateTerminated || s == StateFailed }

// Valid reports whether s is one of States.
func (s State) Valid() bool {
	for _, v := range States {
		if s == v {
			return true
		}
	}
	return false
}

// CostModel prices a pool's requested resources.
type CostModel struct {
	CPUHour       float64 `json:"cpuHour"`
	MemoryGiBHour float64 `json:"memoryGiBHour"`
}

// PoolSource says where a pool is defined, and so who may change it.
type PoolSource string

// Pool sources.
const (
	// PoolFromConfig is a pool of the daemon's config file. The file is the operator's
	// declaration: the daemon writes it at every start, and the API refuses to change
	// or delete it, since the next start would silently undo the change.
	PoolFromConfig PoolSource = "config"
	// PoolFromAPI is a pool created through the admin API (Terraform included), or a
	// development pool after its creation: the API's to change and delete.
	PoolFromAPI PoolSource = "api"
)

// Valid reports whether s is one of the pool sources.
func (s PoolSource) Valid() bool { return s == PoolFromConfig || s == PoolFromAPI }

// Pool is an operator-declared backend reached through one adapter.
type Pool struct {
	Name           string         `json:"name"`
	Adapter        string         `json:"adapter"`
	Trust          api.Trust      `json:"trust"`
	Region         string         `json:"region,omitempty"`
	MaxConcurrency int            `json:"maxConcurrency"`
	MaxStarting    int            `json:"maxStarting"`
	CostModel      CostModel      `json:"costModel"`
	Config         map[string]any `json:"config,omitempty"`
	// CredentialsEnv names the environment variable holding the pool's credentials; the
	// secret itself is never stored.
	CredentialsEnv string   `json:"credentialsEnv,omitempty"`
	Features       []string `json:"features,omitempty"`
	// Warm are the kinds of sandbox the pool keeps started ahead of demand.
	Warm []WarmShape `json:"warm,omitempty"`
	// Source is where the pool is defined. CreatePool takes "" as PoolFromAPI;
	// UpdatePool needs it spelt out, so that no update releases a config file's pool
	// by leaving the field out.
	Source    PoolSource `json:"source"`
	CreatedAt time.Time  `json:"createdAt"`
	UpdatedAt time.Time  `json:"updatedAt"`
	// Version increases by one on every write; UpdatePool compares it (optimistic
	// concurrency).
	Version int64 `json:"version"`
}

// Placement narrows where a sandbox may run.
type Placement struct {
	AllowedPools []string `json:"allowedPools,omitempty"`
	Regions      []string `json:"regions,omitempty"`
}

// Sandbox is one tenant sandbox and the scheduler's bookkeeping about it.
type Sandbox struct {
	ID           string             `json:"id"`
	Org          string             `json:"org"`
	Project      string             `json:"project"`
	State        State              `json:"state"`
	Pool         string             `json:"pool,omitempty"`
	Region       string             `json:"region,omitempty"`
	BackendRef   string             `json:"backendRef,omitempty"`
	Template     string             `json:"template,omitempty"`
	Profile      string             `json:"profile,omitempty"`
	Capabilities []string           `json:"capabilities,omitempty"`
	Resources    adapters.Resources `json:"resources"`
	Labels       map[string]string  `json:"labels,omitempty"`
	// Env is stored because the scheduler passes it to Create; the API never returns it.
	Env          map[string]string `json:"-"`
	TTLSeconds   int64             `json:"ttlSeconds,omitempty"`
	ExpiresAt    *time.Time        `json:"expiresAt,omitempty"`
	FromSnapshot string            `json:"fromSnapshot,omitempty"`
	Placement    Placement         `json:"placement"`
	Attempts     int               `json:"attempts"`
	// Reason says in words why the sandbox waits or failed.
	Reason string `json:"reason,omitempty"`
	// NextAttemptAt is when a queued sandbox becomes claimable (backoff).
	NextAttemptAt time.Time `json:"-"`
	// ClaimedBy and ClaimExpiresAt are the provisioning lease of ClaimSandboxes.
	ClaimedBy      string     `json:"-"`
	ClaimExpiresAt *time.Time `json:"-"`
	// IdempotencyKey is unique per project when set (the Idempotency-Key header).
	IdempotencyKey string `json:"-"`
	// RequestHash identifies the create request that made the sandbox (see
	// httpapi's createRequestHash), so that a create repeating IdempotencyKey with
	// another request can be told apart from a retry. Empty for sandboxes stored
	// before it was kept; set at creation and never changed.
	RequestHash string `json:"-"`
	// InitCommands are the commands the client that made the sandbox runs in it once
	// it is running (the Terraform provider's init_commands), recorded so that an
	// import can read them back. The daemon never runs them; set at creation and
	// never changed.
	InitCommands   []string  `json:"initCommands,omitempty"`
	CreatedAt      time.Time `json:"createdAt"`
	UpdatedAt      time.Time `json:"updatedAt"`
	StateChangedAt time.Time `json:"stateChangedAt"`
	Version        int64     `json:"version"`
	// AvoidPool is a pool that answered insufficient_capacity for this sandbox; until
	// AvoidUntil the scheduler ranks it last. It lives in the row rather than in one
	// replica's memory because whichever replica claims the sandbox next must know.
	AvoidPool  string     `json:"-"`
	AvoidUntil *time.Time `json:"-"`
	// Pending are the events the write in progress appends: server/lifecycle's
	// transitions add them, and CreateSandbox, CreateSandboxAdmitted, UpdateSandbox and
	// UpdateSandboxes append them in the transaction that writes the sandbox. A
	// sandbox read from the store has none.
	Pending []Event `json:"-"`
}

// SandboxFilter selects sandboxes for ListSandboxes. Zero fields do not filter.
type SandboxFilter struct {
	Org     string
	Project string
	States  []State
	Pool    string
	// Labels must all be present with exactly these values.
	Labels map[string]string
	// ExpiresBy, when set, keeps only sandboxes with an expiry at or before it.
	ExpiresBy *time.Time
	// Limit is the page size: DefaultLimit when 0, at most MaxLimit.
	Limit int
	// Cursor is the NextCursor of the previous page; "" starts at the beginning.
	Cursor string
}

// Page sizes of ListSandboxes.
const (
	DefaultLimit = 100
	MaxLimit     = 1000
)

// SnapshotFilter selects snapshots for ListSnapshotPage. Zero fields do not filter.
type SnapshotFilter struct {
	Org, Project string
	SandboxID    string
	// Limit and Cursor page as SandboxFilter's do.
	Limit  int
	Cursor string
}

// Snapshot is a saved disk or memory image of a sandbox.
type Snapshot struct {
	ID        string `json:"id"`
	SandboxID string `json:"sandboxId"`
	Org       string `json:"org,omitempty"`
	Project   string `json:"project,omitempty"`
	Pool      string `json:"pool,omitempty"`
	// BackendRef is the adapter's snapshot ref (restored through CreateRequest.FromSnapshot).
	BackendRef string    `json:"-"`
	Kind       string    `json:"kind"`
	SizeBytes  int64     `json:"sizeBytes"`
	State      string    `json:"state"`
	CreatedAt  time.Time `json:"createdAt"`
}

// ExpiresAt is when a sandbox with a TTL of ttlSeconds that starts running at now
// expires. The API refuses a TTL above api.MaxTTLSeconds; one stored before that bound
// is held to it here, since time.Duration's nanoseconds would overflow past about
// 292 years and put the expiry in the past.
func ExpiresAt(now time.Time, ttlSeconds int64) time.Time {
	return now.Add(time.Duration(min(ttlSeconds, api.MaxTTLSeconds)) * time.Second)
}

// Token scopes.
const (
	ScopeAdmin   = "admin"
	ScopeProject = "project"
)

// TokenDefaultOrg is the organisation of a project token stored without one.
const TokenDefaultOrg = "default"

// ProjectTokensWhere selects the project tokens of one project ($1 org, $2 name),
// those stored without an org included when the org is TokenDefaultOrg. SQLite
// numbers $-parameters in the order they first appear, so $1 comes first.
const ProjectTokensWhere = `scope = 'project' AND (org = $1 OR (org = '' AND $1 = '` +
	TokenDefaultOrg + `')) AND project = $2`

// Token is an API bearer token. Only the SHA-256 of the secret is stored.
type Token struct {
	ID         string     `json:"id"`
	Hash       []byte     `json:"-"`
	Scope      string     `json:"scope"`
	Org        string     `json:"org,omitempty"`
	Project    string     `json:"project,omitempty"`
	Name       string     `json:"name,omitempty"`
	CreatedAt  time.Time  `json:"createdAt"`
	LastUsedAt *time.Time `json:"lastUsedAt,omitempty"`
	// ExpiresAt, when set, is when the token stops being accepted.
	ExpiresAt *time.Time `json:"expiresAt,omitempty"`
}

// Policy is the global placement policy, a singleton document.
type Policy struct {
	// AllowExternal lets the policy engine place work on external pools at all...
	AllowExternal bool `json:"allowExternal"`
	// ...and then only on the pools listed here.
	ExternalPools []string `json:"externalPools,omitempty"`
	// Defaults are free-form defaults (resources, ttlSeconds, ...) kept as JSON.
	Defaults map[string]any `json:"defaults,omitempty"`
}
