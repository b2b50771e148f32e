package opensandbox

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/adapters/httpx"
	"github.com/different-ai/differently/api"
)

// Kind is the adapter kind name used in pool configuration.
const Kind = "opensandbox"

// Version of this adapter implementation, reported in Info.
const Version = "1"

// Metadata keys stamped on every sandbox. OpenSandbox metadata follows Kubernetes
// label rules, so the ownership labels get keys of their own.
const (
	MetaSandboxID    = "differently-sandbox-id"
	MetaInstallation = "differently-installation"
)

// execdPort is where execd listens inside every sandbox.
const execdPort = 44772

// listPageSize is the page size List asks for; maxListPages stops a server that
// always claims another page.
const (
	listPageSize = 50
	maxListPages = 10000
)

// Option adjusts an Adapter built by New.
type Option func(*Adapter)

// WithHTTPClient replaces the HTTP client used for the lifecycle API and execd.
func WithHTTPClient(h *http.Client) Option { return func(a *Adapter) { a.http = h } }

// WithPollInterval sets how often asynchronous operations (readiness, pause,
// snapshots) are polled. Tests make it tiny.
func WithPollInterval(d time.Duration) Option {
	return func(a *Adapter) {
		if d > 0 {
			a.poll = d
		}
	}
}

// WithClock sets the clock for expiry times and signed port URLs.
func WithClock(now func() time.Time) Option {
	return func(a *Adapter) {
		if now != nil {
			a.now = now
		}
	}
}

// Adapter runs sandboxes on one OpenSandbox server. It is safe for concurrent use.
type Adapter struct {
	cfg      Config
	apiKey   string
	api      *httpx.Client
	http     *http.Client
	poll     time.Duration
	now      func() time.Time
	features []string
	pageSize int

	locks keyedMutex

	mu    sync.Mutex
	execd map[string]*httpx.Client // sandbox ID -> execd client, dropped on lifecycle changes
}

var (
	_ adapters.ExecutionAdapter = (*Adapter)(nil)
	_ adapters.Streamer         = (*Adapter)(nil)
	_ adapters.FileSystem       = (*Adapter)(nil)
	_ adapters.Lifecycle        = (*Adapter)(nil)
	_ adapters.Pauser           = (*Adapter)(nil)
	_ adapters.Snapshotter      = (*Adapter)(nil)
	_ adapters.PortExposer      = (*Adapter)(nil)
	_ adapters.TTLRenewer       = (*Adapter)(nil)
)

// New builds an adapter for cfg. apiKey goes into the OPEN-SANDBOX-API-KEY header and
// never into an error message.
func New(cfg Config, apiKey string, opts ...Option) (*Adapter, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	a := &Adapter{cfg: cfg, apiKey: apiKey, poll: time.Second, now: time.Now, pageSize: listPageSize,
		execd: map[string]*httpx.Client{}}
	for _, o := range opts {
		o(a)
	}
	if a.http == nil {
		// No overall timeout: every call is bounded by its context, and execs may be long.
		a.http = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	c, err := httpx.New(Kind, cfg.APIURL, httpx.WithHTTPClient(a.http), httpx.WithHeader("OPEN-SANDBOX-API-KEY", apiKey))
	if err != nil {
		return nil, err
	}
	a.api = c
	a.features = cfg.declaredFeatures()
	return a, nil
}

// FromConfig builds an adapter from a pool's config map and API key.
func FromConfig(cfg map[string]any, apiKey string, opts ...Option) (*Adapter, error) {
	c, err := ParseConfig(cfg)
	if err != nil {
		return nil, err
	}
	return New(c, apiKey, opts...)
}

// Info describes the adapter. The pool's trust setting is authoritative; the claim
// is private because an OpenSandbox server is self-hosted.
func (a *Adapter) Info() adapters.Info {
	iso := "container per sandbox (OpenSandbox " + runtimeName(a.cfg.Runtime) + " runtime)"
	if a.cfg.Isolation == "microvm" {
		iso = "microVM per sandbox (OpenSandbox microVM runtime)"
	}
	disk := "diskGiB is sent as resourceLimits " + diskResource + " (applied by the Kubernetes runtime)"
	if !a.sendsDisk() {
		disk = "diskGiB is not applied (the Docker runtime has no disk limit)"
	}
	return adapters.Info{
		Kind: Kind, Version: Version, Trust: api.TrustPrivate, Isolation: iso + "; declared by config, not checked",
		Protocol: adapters.ProtocolVersion,
		Description: "execd delivers output line by line; line ends are rebuilt as " + a.cfg.LineEndings +
			" (a lone CR becomes a line end); stdin is staged in a temporary file in the sandbox; " +
			disk + "; the provider timeout is at least 60 s, and OpenSandbox only moves it later",
	}
}

func runtimeName(r string) string {
	if r == "" {
		return "configured"
	}
	return r
}

// Capabilities declares the features the configuration implies. Limits are not
// reported by OpenSandbox; a templateId restricts templates to itself.
func (a *Adapter) Capabilities(context.Context) (adapters.Capabilities, error) {
	caps := adapters.Capabilities{Features: slices.Clone(a.features)}
	if a.cfg.TemplateID != "" {
		caps.Templates = []string{a.cfg.TemplateID}
	}
	return caps, nil
}

// Capacity is unbounded: OpenSandbox reports none; the pool's maxConcurrency governs.
func (a *Adapter) Capacity(context.Context) (adapters.Capacity, error) {
	return adapters.Capacity{Bounded: false}, nil
}

// Health lists one sandbox, which needs a reachable server and an accepted key.
func (a *Adapter) Health(ctx context.Context) error {
	q := url.Values{"page": {"1"}, "pageSize": {"1"}}
	return a.api.JSON(ctx, http.MethodGet, "/sandboxes", q, nil, nil)
}

func (a *Adapter) has(feature string) bool { return slices.Contains(a.features, feature) }

// Wire types of the lifecycle API.
type sandboxStatus struct {
	State   string `json:"state"`
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
}

type sandbox struct {
	ID         string            `json:"id"`
	Status     sandboxStatus     `json:"status"`
	Metadata   map[string]string `json:"metadata,omitempty"`
	ExpiresAt  string            `json:"expiresAt,omitempty"`
	SnapshotID string            `json:"snapshotId,omitempty"`
}

type listResponse struct {
	Items      []sandbox `json:"items"`
	Pagination struct {
		// TotalItems is required by the API; a server that leaves it out gets no
		// consistency check rather than a List that always fails.
		TotalItems  *int `json:"totalItems"`
		HasNextPage bool `json:"hasNextPage"`
	} `json:"pagination"`
}

// gone reports whether a sandbox is being or has been deleted: the contract counts
// it as missing.
func gone(state string) bool { return state == "Terminated" || state == "Stopping" }

func (a *Adapter) instance(sb sandbox) adapters.Instance {
	inst := adapters.Instance{Ref: sb.ID, SandboxID: sb.Metadata[MetaSandboxID]}
	switch sb.Status.State {
	case "Running":
		inst.State = adapters.StateRunning
	case "Paused":
		inst.State = adapters.StatePaused
		if a.cfg.Runtime == "kubernetes" {
			inst.State = adapters.StateStopped
		}
	case "Failed":
		inst.State, inst.Message = adapters.StateError, a.statusText(sb.Status)
	default:
		// Pending, Pausing, Resuming and states added later: in transition.
		inst.State = adapters.StatePending
	}
	return inst
}

// statusText is the server's own account of a state, without the API key in case the
// server quotes a request in it.
func (a *Adapter) statusText(s sandboxStatus) string {
	return a.api.Scrub(statusWords(s))
}

func statusWords(s sandboxStatus) string {
	switch {
	case s.Message != "" && s.Reason != "":
		return s.Reason + ": " + s.Message
	case s.Message != "":
		return s.Message
	}
	return s.Reason
}

func (a *Adapter) getSandbox(ctx context.Context, ref string) (sandbox, error) {
	if ref == "" || strings.ContainsAny(ref, "/?#") {
		return sandbox{}, adapters.NotFound("opensandbox: no sandbox %q", ref)
	}
	var sb sandbox
	if err := a.api.JSON(ctx, http.MethodGet, "/sandboxes/"+url.PathEscape(ref), nil, nil, &sb); err != nil {
		return sandbox{}, err
	}
	if gone(sb.Status.State) {
		return sandbox{}, adapters.NotFound("opensandbox: sandbox %s is %s", ref, sb.Status.State)
	}
	return sb, nil
}

// Get returns the instance for ref; a deleted or deleting sandbox is not_found.
func (a *Adapter) Get(ctx context.Context, ref string) (adapters.Instance, error) {
	sb, err := a.getSandbox(ctx, ref)
	if err != nil {
		return adapters.Instance{}, err
	}
	return a.instance(sb), nil
}

// List returns every live sandbox stamped with installation, reading every page.
// Any failed page fails the whole call: a partial list would make the reconciler
// fail sandboxes it could not see.
func (a *Adapter) List(ctx context.Context, installation string) ([]adapters.Instance, error) {
	items, err := a.listByMetadata(ctx, MetaInstallation, installation)
	if err != nil {
		return nil, err
	}
	out := []adapters.Instance{}
	for _, sb := range items {
		out = append(out, a.instance(sb))
	}
	return out, nil
}

// listAttempts is how many times listByMetadata pages through a listing that
// changes under it before it gives up.
const listAttempts = 3

// listByMetadata pages through the sandboxes whose metadata has key=value, skipping
// deleted ones. The filter is checked again here, so a server that ignores it
// cannot hand us another installation's sandboxes.
//
// Pages are numbered, so a sandbox created or deleted between two requests shifts
// the ones after it across a page boundary, and one can go unseen: a partial list,
// which the contract forbids. A listing whose totalItems changed from one page to
// the next, or whose pages did not add up to it, is read again from the start; one
// that never holds still fails.
func (a *Adapter) listByMetadata(ctx context.Context, key, value string) ([]sandbox, error) {
	for range listAttempts {
		out, whole, err := a.listOnce(ctx, key, value)
		if err != nil || whole {
			return out, err
		}
	}
	return nil, adapters.Unavailable("opensandbox: the list of sandboxes changed while it was read, %d times in a row", listAttempts)
}

// listOnce reads every page once; whole is false when the listing changed meanwhile.
func (a *Adapter) listOnce(ctx context.Context, key, value string) (out []sandbox, whole bool, err error) {
	// The metadata parameter is itself a query string, encoded once more as a value.
	filter := url.QueryEscape(key) + "=" + url.QueryEscape(value)
	total, seen := -1, 0
	ids := map[string]bool{}
	for page := 1; ; page++ {
		if page > maxListPages {
			return nil, false, adapters.Unavailable("opensandbox: list did not end after %d pages", maxListPages)
		}
		q := url.Values{"metadata": {filter}, "page": {fmt.Sprint(page)}, "pageSize": {fmt.Sprint(a.pageSize)}}
		var resp listResponse
		if err := a.api.JSON(ctx, http.MethodGet, "/sandboxes", q, nil, &resp); err != nil {
			return nil, false, fmt.Errorf("list page %d: %w", page, err)
		}
		if n := resp.Pagination.TotalItems; n != nil {
			if total >= 0 && *n != total {
				return nil, false, nil
			}
			total = *n
		}
		seen += len(resp.Items)
		for _, sb := range resp.Items {
			if sb.ID != "" && !ids[sb.ID] && sb.Metadata[key] == value && !gone(sb.Status.State) {
				ids[sb.ID] = true
				out = append(out, sb)
			}
		}
		if !resp.Pagination.HasNextPage {
			return out, total < 0 || seen == total, nil
		}
	}
}

// Delete removes the sandbox. A missing or already deleted one is success.
func (a *Adapter) Delete(ctx context.Context, ref string) error {
	a.dropExecd(ref)
	if ref == "" || strings.ContainsAny(ref, "/?#") {
		return nil
	}
	err := a.api.JSON(ctx, http.MethodDelete, "/sandboxes/"+url.PathEscape(ref), nil, nil, nil)
	switch {
	case err == nil || api.IsCode(err, api.CodeNotFound):
		return nil
	case api.IsCode(err, api.CodeInvalidState):
		// A conflict usually means a deletion is already under way.
		if _, gerr := a.getSandbox(ctx, ref); api.IsCode(gerr, api.CodeNotFound) {
			return nil
		}
	}
	return err
}

// metadataValue and metadataName are the Kubernetes label rules OpenSandbox applies.
var (
	metadataValue = regexp.MustCompile(`^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$`)
	metadataName  = regexp.MustCompile(`^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$`)
	dnsSubdomain  = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)
)

// fitsMetadata reports whether a label can be stored as OpenSandbox metadata.
func fitsMetadata(k, v string) bool {
	if !metadataValue.MatchString(v) {
		return false
	}
	name := k
	if prefix, rest, ok := strings.Cut(k, "/"); ok {
		if len(prefix) > 253 || !dnsSubdomain.MatchString(prefix) || strings.HasPrefix(prefix, "opensandbox.io") {
			return false
		}
		name = rest
	}
	return metadataName.MatchString(name)
}

// keyedMutex hands out one mutex per key, so that concurrent Creates of one
// sandbox in this process do not both miss the lookup and create two.
type keyedMutex struct {
	mu    sync.Mutex
	locks map[string]*keyedEntry
}

type keyedEntry struct {
	mu   sync.Mutex
	refs int
}

func (k *keyedMutex) lock(key string) (unlock func()) {
	k.mu.Lock()
	if k.locks == nil {
		k.locks = map[string]*keyedEntry{}
	}
	e := k.locks[key]
	if e == nil {
		e = &keyedEntry{}
		k.locks[key] = e
	}
	e.refs++
	k.mu.Unlock()
	e.mu.Lock()
	return func() {
		e.mu.Unlock()
		k.mu.Lock()
		if e.refs--; e.refs == 0 {
			delete(k.locks, key)
		}
		k.mu.Unlock()
	}
}
