package daytona

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"time"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/adapters/httpx"
	"github.com/different-ai/differently/adapters/poolconfig"
	"github.com/different-ai/differently/api"
)

// Kind is the adapter kind reported by Info.
const Kind = "daytona"

// Limits declared in Capabilities: Daytona's default per-sandbox maximum.
const (
	MaxCPU       = 4
	MaxMemoryMiB = 8 << 10
	MaxDiskGiB   = 10
)

// pageLimit is the largest page Daytona's list accepts.
const pageLimit = 200

// description documents the contract deviations, for operators and the conformance
// suite alike.
const description = "Daytona's toolbox returns one combined output: exec reports stdout and stderr " +
	"together as stdout, with stderr empty. Exec has no stdin: a request with stdin answers " +
	"unsupported_operation. Exec output is buffered (no exec.stream). Resources are not sent: " +
	"a sandbox gets the size of its Daytona snapshot."

// Adapter is the Daytona adapter. Build it with New; it is safe for concurrent use.
type Adapter struct {
	cfg    Config
	apiKey string
	api    *httpx.Client
	http   *http.Client
	poll   time.Duration
	// httpx configures every client of the API and the toolbox, after the defaults.
	httpx []httpx.Option
}

// New builds an adapter for cfg authenticating with apiKey.
func New(cfg Config, apiKey string, opts ...Option) (*Adapter, error) {
	if apiKey == "" {
		return nil, adapters.InvalidRequest("daytona: an API key is required")
	}
	if cfg.APIURL == "" {
		cfg.APIURL = DefaultAPIURL
	}
	if cfg.Class == "" {
		cfg.Class = ClassContainer
	}
	if cfg.Class != ClassContainer && cfg.Class != ClassLinuxVM {
		return nil, poolconfig.KeyError(Kind, "class", fmt.Errorf("want %q or %q, got %q", ClassContainer, ClassLinuxVM, cfg.Class))
	}
	o := options{poll: time.Second}
	for _, opt := range opts {
		opt(&o)
	}
	if o.http == nil {
		// No overall timeout: every call is bounded by its context. Redirects are not
		// followed so that the key never travels to another host.
		o.http = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	a := &Adapter{cfg: cfg, apiKey: apiKey, http: o.http, poll: o.poll, httpx: o.httpx}
	c, err := a.client(cfg.APIURL)
	if err != nil {
		return nil, err
	}
	a.api = c
	return a, nil
}

// client returns a client of the API or of a toolbox rooted at base.
func (a *Adapter) client(base string) (*httpx.Client, error) {
	opts := append([]httpx.Option{httpx.WithBearer(a.apiKey), httpx.WithHTTPClient(a.http),
		httpx.WithMessageCode(api.CodeInvalidRequest, oversizedMessages, http.StatusBadRequest, http.StatusForbidden),
		httpx.WithMessageCode(api.CodeInsufficientCapacity, capacityMessages, http.StatusBadRequest, http.StatusForbidden)}, a.httpx...)
	return httpx.New(Kind, base, opts...)
}

// oversizedMessages are how Daytona refuses a sandbox bigger than its organisation
// allows any one sandbox ("CPU request 8 exceeds maximum allowed per sandbox (4)",
// 403): no retry can fit it, and the pool is not at fault.
var oversizedMessages = regexp.MustCompile(`(?i)exceeds maximum allowed per sandbox`)

// capacityMessages are how Daytona refuses a create or a start for want of room: an
// organisation over its CPU, memory or disk quota (403 on current releases, 400 on
// some older ones: "Total CPU limit exceeded. Maximum allowed: 10.") and no runner
// free to take the sandbox (400 "No available runners"). Anchored on these phrases,
// so that a bad snapshot name or a rejected key keeps its own code.
var capacityMessages = regexp.MustCompile(`(?i)total (cpu|memory|disk|gpu) limit exceeded|no available runners|(sandbox|sandboxes|concurrency) (limit|quota) (exceeded|reached)`)

var (
	_ adapters.ExecutionAdapter = (*Adapter)(nil)
	_ adapters.FileSystem       = (*Adapter)(nil)
	_ adapters.Lifecycle        = (*Adapter)(nil)
	_ adapters.Pauser           = (*Adapter)(nil)
	_ adapters.Snapshotter      = (*Adapter)(nil)
	_ adapters.PortExposer      = (*Adapter)(nil)
	_ adapters.TTLRenewer       = (*Adapter)(nil)
)

// Info describes the adapter. Trust is external whatever the pool says: the
// sandboxes run on Daytona's machines.
func (a *Adapter) Info() adapters.Info {
	iso := "Container per sandbox on Daytona's infrastructure (class container)"
	if a.cfg.Class == ClassLinuxVM {
		iso = "Virtual machine per sandbox on Daytona's infrastructure (class linux-vm)"
	}
	return adapters.Info{
		Kind:        Kind,
		Trust:       api.TrustExternal,
		Isolation:   iso,
		Protocol:    adapters.ProtocolVersion,
		Description: description,
	}
}

// Capabilities declares what the configured class offers. Fork is not advertised:
// a fork would go through a named Daytona snapshot per copy, which is slow and billed.
func (a *Adapter) Capabilities(context.Context) (adapters.Capabilities, error) {
	features := []string{
		adapters.FeatureExec,
		adapters.FeatureFiles,
		adapters.FeatureStopStart,
		adapters.FeaturePersistenceDisk,
		adapters.FeatureSnapshotsDisk,
		adapters.FeaturePortsExpose,
	}
	if a.cfg.Class == ClassLinuxVM {
		features = append(features, adapters.FeaturePauseResume, adapters.FeatureSnapshotsMemory, adapters.FeatureMicroVM)
	} else {
		features = append(features, adapters.FeatureContainer)
	}
	caps := adapters.Capabilities{Features: features, MaxCPU: MaxCPU, MaxMemoryMiB: MaxMemoryMiB, MaxDiskGiB: MaxDiskGiB}
	if a.cfg.Target != "" {
		caps.Regions = []string{a.cfg.Target}
	}
	return caps, nil
}

// Capacity is unbounded: Daytona reports no free capacity, and its limits show up as
// 429 answers, which Create reports as insufficient_capacity.
func (a *Adapter) Capacity(context.Context) (adapters.Capacity, error) {
	return adapters.Capacity{Bounded: false}, nil
}

// Health lists one sandbox: it proves the API answers and accepts the key.
func (a *Adapter) Health(ctx context.Context) error {
	var page listPage
	return a.api.JSON(ctx, http.MethodGet, "/sandbox", url.Values{"limit": {"1"}}, nil, &page)
}

// sandbox is the part of Daytona's Sandbox (and SandboxListItem) the adapter reads.
type sandbox struct {
	ID              string            `json:"id"`
	Name            string            `json:"name"`
	Target          string            `json:"target"`
	State           string            `json:"state"`
	ErrorReason     string            `json:"errorReason"`
	Labels          map[string]string `json:"labels"`
	ToolboxProxyURL string            `json:"toolboxProxyUrl"`
}

type listPage struct {
	Items      []sandbox `json:"items"`
	NextCursor *string   `json:"nextCursor"`
}

// createBody is Daytona's CreateSandbox, as far as the adapter fills it in.
type createBody struct {
	Name     string            `json:"name"`
	Snapshot string            `json:"snapshot,omitempty"`
	Target   string            `json:"target,omitempty"`
	Env      map[string]string `json:"env,omitempty"`
	Labels   map[string]string `json:"labels"`
	// AutoStopInterval is always sent: 0 switches Daytona's idle auto-stop off (its
	// default is 15 minutes), so that only Differently stops sandboxes.
	AutoStopInterval int   `json:"autoStopInterval"`
	TTLMinutes       int64 `json:"ttlMinutes,omitempty"`
}

// gone reports states of a sandbox that is deleted or being deleted.
func gone(state string) bool { return state == "destroyed" || state == "destroying" }

func failed(state string) bool { return state == "error" || state == "build_failed" }

// instanceState maps Daytona's sandbox states onto the contract's five.
func instanceState(state string) adapters.InstanceState {
	switch state {
	case "started":
		return adapters.StateRunning
	case "stopped", "stopping", "archived", "archiving":
		// An archived sandbox is a stopped one whose disk moved to cheaper storage;
		// start brings it back.
		return adapters.StateStopped
	case "paused", "pausing":
		return adapters.StatePaused
	case "error", "build_failed":
		return adapters.StateError
	default:
		return adapters.StatePending
	}
}

func (a *Adapter) instance(sb sandbox) adapters.Instance {
	inst := adapters.Instance{
		Ref:       sb.ID,
		SandboxID: sb.Labels[adapters.LabelSandboxID],
		State:     instanceState(sb.State),
		Region:    sb.Target,
	}
	if inst.State == adapters.StateError {
		inst.Message = a.api.Scrub(sb.ErrorReason)
	}
	return inst
}

// getSandbox reads a sandbox by ID or name; a deleted one is not_found.
func (a *Adapter) getSandbox(ctx context.Context, idOrName string) (sandbox, error) {
	if idOrName == "" {
		return sandbox{}, adapters.NotFound("daytona: empty sandbox ref")
	}
	var sb sandbox
	if err := a.api.JSON(ctx, http.MethodGet, "/sandbox/"+url.PathEscape(idOrName), nil, nil, &sb); err != nil {
		return sandbox{}, err
	}
	if gone(sb.State) {
		return sandbox{}, adapters.NotFound("daytona: sandbox %s is %s", idOrName, sb.State)
	}
	return sb, nil
}

// Get returns the instance behind ref.
func (a *Adapter) Get(ctx context.Context, ref string) (adapters.Instance, error) {
	sb, err := a.getSandbox(ctx, ref)
	if err != nil {
		return adapters.Instance{}, err
	}
	return a.instance(sb), nil
}

// listByLabels pages through every sandbox carrying labels, skipping deleted ones.
// Any failing page fails the whole call: a partial list would make the reconciler
// treat the missing sandboxes as lost.
func (a *Adapter) listByLabels(ctx context.Context, labels map[string]string) ([]sandbox, error) {
	filter, err := json.Marshal(labels)
	if err != nil {
		return nil, fmt.Errorf("daytona: encode label filter: %w", err)
	}
	var out []sandbox
	seen := map[string]bool{}
	cursor := ""
	for {
		q := url.Values{"labels": {string(filter)}, "limit": {fmt.Sprint(pageLimit)}}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		var page listPage
		if err := a.api.JSON(ctx, http.MethodGet, "/sandbox", q, nil, &page); err != nil {
			return nil, err
		}
		for _, sb := range page.Items {
			// The filter is re-checked here so that a server ignoring it can never make
			// this installation adopt or delete someone else's sandboxes.
			if gone(sb.State) || !hasLabels(sb.Labels, labels) {
				continue
			}
			out = append(out, sb)
		}
		if page.NextCursor == nil || *page.NextCursor == "" {
			return out, nil
		}
		cursor = *page.NextCursor
		if seen[cursor] {
			return nil, adapters.Unavailable("daytona: list returned cursor %q twice", cursor)
		}
		seen[cursor] = true
	}
}

func hasLabels(have, want map[string]string) bool {
	for k, v := range want {
		if have[k] != v {
			return false
		}
	}
	return true
}

// List returns every sandbox of the installation that is not being deleted.
func (a *Adapter) List(ctx context.Context, installation string) ([]adapters.Instance, error) {
	if installation == "" {
		return nil, adapters.InvalidRequest("daytona: list needs an installation")
	}
	sbs, err := a.listByLabels(ctx, map[string]string{adapters.LabelInstallation: installation})
	if err != nil {
		return nil, err
	}
	out := make([]adapters.Instance, 0, len(sbs))
	for _, sb := range sbs {
		out = append(out, a.instance(sb))
	}
	return out, nil
}

// Delete removes a sandbox. A missing or already deleting one is success.
func (a *Adapter) Delete(ctx context.Context, ref string) error {
	if ref == "" {
		return nil
	}
	err := a.api.JSON(ctx, http.MethodDelete, "/sandbox/"+url.PathEscape(ref), nil, nil, nil)
	switch {
	case err == nil, api.IsCode(err, api.CodeNotFound):
		return nil
	case api.IsCode(err, api.CodeInvalidState):
		// A conflict may mean the deletion is already under way; only that is success.
		if _, gerr := a.getSandbox(ctx, ref); api.IsCode(gerr, api.CodeNotFound) {
			return nil
		}
	}
	return err
}

// RenewTTL re-anchors Daytona's TTL backstop at now plus ttlSeconds (rounded up to a
// minute); 0 switches it off where the organisation allows.
func (a *Adapter) RenewTTL(ctx context.Context, ref string, ttlSeconds int64) error {
	if ttlSeconds < 0 {
		return adapters.InvalidRequest("daytona: ttlSeconds must not be negative")
	}
	path := fmt.Sprintf("/sandbox/%s/ttl/%d", url.PathEscape(ref), ttlMinutes(ttlSeconds))
	return a.api.JSON(ctx, http.MethodPost, path, nil, nil, nil)
}

// ttlMinutes rounds up, so the backstop never fires before the TTL.
func ttlMinutes(seconds int64) int64 { return (seconds + 59) / 60 }
