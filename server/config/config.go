// Package config reads the daemon's production config file: the database, the listen
// address, TLS, scheduler settings and the pools (the seed's section 10 format). Parsing
// is strict, because a misspelt key silently ignored (maxConcurency) is a production
// outage found too late; Validate then checks what the types cannot.
package config

import (
	"github.com/different-ai/differently/adapters"

	"fmt"
	"maps"
	"net/netip"
	"os"
	"slices"
	"time"

	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/internal/netpolicy"
	"github.com/different-ai/differently/server/defaults"
	"github.com/different-ai/differently/server/store"
)

// EnvDatabaseURL overrides database.url when set, so the secret-bearing URL can stay out
// of the file.
const EnvDatabaseURL = "DIFFERENTLY_DATABASE_URL"

// Config is the whole config file. Keys are camelCase, as in the seed.
type Config struct {
	Database  Database     `yaml:"database"`
	Listen    string       `yaml:"listen"`
	TLS       TLS          `yaml:"tls"`
	Scheduler Scheduler    `yaml:"scheduler"`
	Files     Files        `yaml:"files"`
	Events    Events       `yaml:"events"`
	E2B       E2B          `yaml:"e2b"`
	Console   Console      `yaml:"console"`
	Pools     []PoolConfig `yaml:"pools"`
	// PoolCredentials restricts which of the daemon's variables pools may name as
	// their credential, whether they come from this file or the admin API.
	PoolCredentials PoolCredentials `yaml:"poolCredentials"`
	// PoolEndpoints restricts the networks pools' endpoints may be in, whether the
	// pools come from this file or the admin API.
	PoolEndpoints PoolEndpoints `yaml:"poolEndpoints"`
	// DataDir is development mode's data directory (--data-dir wins). Outside it
	// everything is in the database, and the daemon warns that the key does nothing.
	DataDir string `yaml:"dataDir"`
	// MaxConnections bounds the API's open connections; 0 takes half the process's
	// open-file limit, at most 4096 (httpapi.DefaultMaxConnections).
	MaxConnections int `yaml:"maxConnections"`
}

// PoolCredentials is the operator's say over pools' credentials variables.
type PoolCredentials struct {
	// AllowedEnv lists the only variables a pool's credentials.env may name: names,
	// or patterns in which * stands for any run of characters (DAYTONA_*). Left out,
	// a pool may name any variable but the daemon's own (DIFFERENTLY_*, PG*), so an
	// admin token could have any secret of the daemon's environment sent to an
	// endpoint of its choosing. An empty list allows none.
	AllowedEnv []string `yaml:"allowedEnv"`
}

// CredentialsAllowlist is AllowedEnv as the rule the API, the pool manager, preflight
// and Validate apply. An entry with a problem (Validate reports it) is left out, so a
// list with a mistake in it refuses more than the file meant, never less.
func (c *Config) CredentialsAllowlist() api.EnvAllowlist {
	entries := c.PoolCredentials.AllowedEnv
	if entries == nil {
		return api.EnvAllowlist{}
	}
	good := []string{}
	for _, p := range entries {
		if api.CheckEnvPattern(p) == nil {
			good = append(good, p)
		}
	}
	l, _ := api.NewEnvAllowlist(good) // every entry is checked above
	return l
}

// PoolEndpoints is the operator's say over where pools' endpoints may be. Entries
// are networks in CIDR notation (10.0.0.0/8, fd00::/8) or single addresses.
type PoolEndpoints struct {
	// AllowedNetworks, when not empty, are the only networks an endpoint's address
	// may be in. Left out or empty, every network is allowed but the denied ones.
	AllowedNetworks []string `yaml:"allowedNetworks"`
	// DeniedNetworks are refused even when allowed. Left out, a production daemon
	// denies netpolicy.DefaultDenied (the link-local networks 169.254.0.0/16 and
	// fe80::/10, where most cloud metadata services answer, and the metadata
	// addresses fd00:ec2::254 and 100.100.100.200) and a development daemon denies
	// none; written, the list replaces that default, so an operator who lists
	// networks of their own and still wants those denied lists them too.
	DeniedNetworks []string `yaml:"deniedNetworks"`
}

// EndpointPolicy is PoolEndpoints as the rule the registry and the adapters' dials
// apply. An entry with a problem (Validate reports it) is left out; an allowed list
// left with none allows nothing.
func (c *Config) EndpointPolicy(dev bool) *netpolicy.Policy {
	parse := func(entries []string) []netip.Prefix {
		var out []netip.Prefix
		for _, e := range entries {
			if p, err := netpolicy.ParsePrefix(e); err == nil {
				out = append(out, p)
			}
		}
		return out
	}
	p := &netpolicy.Policy{Allowed: parse(c.PoolEndpoints.AllowedNetworks), Denied: parse(c.PoolEndpoints.DeniedNetworks)}
	if len(p.Allowed) == 0 && len(c.PoolEndpoints.AllowedNetworks) > 0 {
		// Every entry was bad: allow nothing rather than everything.
		p.Allowed = []netip.Prefix{{}}
	}
	if c.PoolEndpoints.DeniedNetworks == nil && !dev {
		p.Denied = slices.Clone(netpolicy.DefaultDenied)
	}
	return p
}

// Database says where the store lives: postgres://..., sqlite://PATH or a file path.
type Database struct {
	URL string `yaml:"url"`
}

// TLS turns on HTTPS when both files are given.
type TLS struct {
	CertFile string `yaml:"certFile"`
	KeyFile  string `yaml:"keyFile"`
}

// Enabled reports whether TLS is configured.
func (t TLS) Enabled() bool { return t.CertFile != "" || t.KeyFile != "" }

// Scheduler holds the scheduler's knobs; Default fills in the seed's values.
type Scheduler struct {
	ProvisionTimeoutSeconds  int `yaml:"provisionTimeoutSeconds"`
	MaxAttempts              int `yaml:"maxAttempts"`
	ReconcileIntervalSeconds int `yaml:"reconcileIntervalSeconds"`
	TerminateTimeoutSeconds  int `yaml:"terminateTimeoutSeconds"`
	// MaxQueued bounds the sandboxes waiting for a pool, so a flood of creates is
	// refused instead of growing the queue without limit.
	MaxQueued int `yaml:"maxQueued"`
	// DefaultMaxStarting applies to pools that leave maxStarting at 0.
	DefaultMaxStarting int `yaml:"defaultMaxStarting"`
	// ReconcilePassesKept is how many reconcile passes the database keeps, the
	// newest (GET /v1/admin/reconcile/passes).
	ReconcilePassesKept int `yaml:"reconcilePassesKept"`
}

// Files bounds the large file transfers of the API in flight on one replica: a
// transfer over the bound answers 503 with Retry-After instead of taking memory and
// backend connections without limit.
type Files struct {
	// MaxTransfers bounds them for the whole replica, MaxProjectTransfers for one
	// project, so that one project cannot take every slot.
	MaxTransfers        int `yaml:"maxTransfers"`
	MaxProjectTransfers int `yaml:"maxProjectTransfers"`
	// LargeTransferBytes is the size above which a transfer counts; one whose size
	// is not known ahead (a chunked upload) always counts.
	LargeTransferBytes int64 `yaml:"largeTransferBytes"`
}

// E2B is the E2B-compatible front door (docs/e2b.md), through which E2B's SDKs use
// the daemon's sandboxes with a project token.
type E2B struct {
	// Enabled serves it under /e2b. On by default: it answers only callers with a
	// valid token, as the native API does, and reaches nothing the native API does
	// not.
	Enabled bool `yaml:"enabled"`
}

// Console is the operator console in the browser, served under /ui
// (docs/console.md).
type Console struct {
	// Enabled serves it. On by default: it signs in only with a valid token, shows
	// a token only what the API would show it, and loads nothing from elsewhere.
	Enabled bool `yaml:"enabled"`
}

// EnvE2BTokenSecret holds the secret that signs the E2B front door's per-sandbox
// envd access tokens. Every replica of one installation needs the same; left unset,
// each start makes a random one, which suits a single replica (tokens given out
// before a restart stop working, and the SDKs' connect hands out new ones).
const EnvE2BTokenSecret = "DIFFERENTLY_E2B_TOKEN_SECRET"

// MinE2BTokenSecretBytes is the shortest EnvE2BTokenSecret the daemon takes.
const MinE2BTokenSecretBytes = 32

// Events bounds the sandbox event history (docs/events.md), so that its table does
// not grow without limit.
type Events struct {
	// KeepPerSandbox is how many events of one sandbox are kept, the newest; 0
	// keeps every one.
	KeepPerSandbox int `yaml:"keepPerSandbox"`
	// KeepAfterTerminalSeconds is how long a sandbox's events are kept once it has
	// ended (terminated or failed); 0 keeps them as long as KeepPerSandbox allows.
	KeepAfterTerminalSeconds int `yaml:"keepAfterTerminalSeconds"`
}

// PoolConfig is one pool as written in the file.
type PoolConfig struct {
	Name    string    `yaml:"name"`
	Adapter string    `yaml:"adapter"`
	Trust   api.Trust `yaml:"trust"`
	Region  string    `yaml:"region"`
	// MaxConcurrency 0 means no limit beyond what the adapter's capacity says.
	MaxConcurrency int `yaml:"maxConcurrency"`
	// MaxStarting 0 means the scheduler's defaultMaxStarting.
	MaxStarting int            `yaml:"maxStarting"`
	CostModel   CostModel      `yaml:"costModel"`
	Config      map[string]any `yaml:"config"`
	Credentials Credentials    `yaml:"credentials"`
	Features    []string       `yaml:"features"`
	// Warm are the kinds of sandbox the pool keeps started ahead of demand.
	Warm []WarmConfig `yaml:"warm"`
}

// WarmConfig is one warm shape as written in the file (store.WarmShape).
type WarmConfig struct {
	Template      string          `yaml:"template"`
	Profile       string          `yaml:"profile"`
	Resources     ResourcesConfig `yaml:"resources"`
	Size          int             `yaml:"size"`
	MaxAgeSeconds int             `yaml:"maxAgeSeconds"`
}

// ResourcesConfig is a warm shape's resources as written in the file.
type ResourcesConfig struct {
	CPU       float64 `yaml:"cpu"`
	MemoryMiB int     `yaml:"memoryMiB"`
	DiskGiB   int     `yaml:"diskGiB"`
}

// StoreWarm converts the pool's warm shapes to their stored form.
func (p PoolConfig) StoreWarm() []store.WarmShape {
	if len(p.Warm) == 0 {
		return nil
	}
	out := make([]store.WarmShape, len(p.Warm))
	for i, w := range p.Warm {
		out[i] = store.WarmShape{Template: w.Template, Profile: w.Profile, Size: w.Size, MaxAgeSeconds: int64(w.MaxAgeSeconds),
			Resources: adapters.Resources{CPU: w.Resources.CPU, MemoryMiB: int64(w.Resources.MemoryMiB), DiskGiB: int64(w.Resources.DiskGiB)}}
	}
	return out
}

// CostModel prices a pool's requested resources.
type CostModel struct {
	CPUHour       float64 `yaml:"cpuHour"`
	MemoryGiBHour float64 `yaml:"memoryGiBHour"`
}

// Credentials name where a pool's secret comes from; the file never holds the secret.
type Credentials struct {
	Env string `yaml:"env"`
}

// Default returns a config with every default filled in and no pools. Parse decodes
// over it, so a key left out keeps its default while a key written as 0 stays 0 (and
// Validate says why that is wrong) instead of being replaced behind the operator's back.
func Default() *Config {
	return &Config{
		Listen: defaults.Listen,
		Scheduler: Scheduler{
			ProvisionTimeoutSeconds:  int(defaults.ProvisionTimeout / time.Second),
			MaxAttempts:              defaults.MaxAttempts,
			ReconcileIntervalSeconds: int(defaults.ReconcileInterval / time.Second),
			TerminateTimeoutSeconds:  int(defaults.TerminateTimeout / time.Second),
			MaxQueued:                defaults.MaxQueued,
			DefaultMaxStarting:       defaults.MaxStarting,
			ReconcilePassesKept:      defaults.ReconcilePassesKept,
		},
		Files: Files{MaxTransfers: defaults.MaxTransfers, MaxProjectTransfers: defaults.MaxProjectTransfers,
			LargeTransferBytes: defaults.LargeTransferBytes},
		Events: Events{KeepPerSandbox: defaults.EventsPerSandbox,
			KeepAfterTerminalSeconds: int(defaults.EventsAfterTerminal / time.Second)},
		E2B:     E2B{Enabled: true},
		Console: Console{Enabled: true},
	}
}

// Load reads and parses the file at path. Errors carry the path and line.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	return parse(path, data)
}

// Parse parses config file content. Errors carry the line ("line 7: ...").
func Parse(data []byte) (*Config, error) {
	return parse("", data)
}

// ApplyEnv lets EnvDatabaseURL override database.url. getenv is os.Getenv in the daemon
// and a map lookup in tests.
func (c *Config) ApplyEnv(getenv func(string) string) {
	if getenv == nil {
		return
	}
	if u := getenv(EnvDatabaseURL); u != "" {
		c.Database.URL = u
	}
}

// Trust rules per adapter kind: the seed's section 9. A kind listed in forcedTrust
// always runs with that trust; one in defaultTrust gets it when the pool leaves trust
// out; any other kind must state its trust, because only the operator knows whose
// infrastructure a self-hostable backend runs on.
var (
	forcedTrust = map[string]api.Trust{
		"daytona":   api.TrustExternal,
		"freestyle": api.TrustExternal,
	}
	defaultTrust = map[string]api.Trust{
		"remote":  api.TrustPrivate,
		"fake":    api.TrustPrivate,
		"devhost": api.TrustPrivate,
		"local":   api.TrustPrivate,
	}
)

// EffectiveTrust is the trust the pool runs with after the per-kind rules; "" when the
// kind needs an explicit trust and none was given (Validate reports that).
func (p PoolConfig) EffectiveTrust() api.Trust {
	if t, ok := forcedTrust[p.Adapter]; ok {
		return t
	}
	if p.Trust != "" {
		return p.Trust
	}
	return defaultTrust[p.Adapter]
}

// StorePool converts the pool to its stored form, a pool of the config file. Config and
// Features are copied so the store row and the parsed file never share mutable state.
func (p PoolConfig) StorePool() store.Pool {
	return store.Pool{
		Name:           p.Name,
		Adapter:        p.Adapter,
		Trust:          p.EffectiveTrust(),
		Region:         p.Region,
		MaxConcurrency: p.MaxConcurrency,
		MaxStarting:    p.MaxStarting,
		CostModel:      store.CostModel{CPUHour: p.CostModel.CPUHour, MemoryGiBHour: p.CostModel.MemoryGiBHour},
		Config:         cloneMap(p.Config),
		CredentialsEnv: p.Credentials.Env,
		Features:       slices.Clone(p.Features),
		Warm:           p.StoreWarm(),
		Source:         store.PoolFromConfig,
	}
}

func cloneMap(m map[string]any) map[string]any {
	if m == nil {
		return nil
	}
	out := maps.Clone(m)
	for k, v := range out {
		out[k] = cloneValue(v)
	}
	return out
}

func cloneValue(v any) any {
	switch x := v.(type) {
	case map[string]any:
		return cloneMap(x)
	case []any:
		out := make([]any, len(x))
		for i, item := range x {
			out[i] = cloneValue(item)
		}
		return out
	}
	return v
}
