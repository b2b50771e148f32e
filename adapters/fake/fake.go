package fake

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/internal/ids"
)

// Kind is the adapter kind reported by Info.
const Kind = "fake"

// Resources charged against a bounded capacity for a request that leaves them zero,
// so that a pool of default-sized sandboxes still fills up.
const (
	DefaultCPU       = 1
	DefaultMemoryMiB = 1024
)

// unlimited stands in for a capacity dimension the config leaves unset. It is large
// enough never to bind and small enough that summing it over pools cannot overflow.
const unlimited = 1 << 40

// Adapter is the in-memory adapter. Build it with New or FromConfig; all methods are
// safe for concurrent use.
type Adapter struct {
	cfg   Config
	sleep func(context.Context, time.Duration) error

	mu          sync.Mutex
	byRef       map[string]*instance
	byID        map[string]*instance
	snapshots   map[string]*snapshot
	createCalls int
	createErrs  []api.Code
	dropsLeft   int
	listError   bool
	healthError bool
	// rng draws the probabilistic faults; guarded by mu, so draws are safe for
	// concurrent use and follow the order in which calls take the lock.
	rng *rand.Rand
}

type instance struct {
	pub          adapters.Instance
	installation string
	template     string
	resources    adapters.Resources
	charged      adapters.Resources
	env          map[string]string
	labels       map[string]string
	files        map[string]file
	// ttlSeconds is the simulated backend expiry: CreateRequest.TTLSeconds, then what
	// the last RenewTTL set. renewals counts RenewTTL calls.
	ttlSeconds int64
	renewals   int
	// ready is closed when a pending creation ends, either way; concurrent Creates
	// for the same sandbox wait on it.
	ready chan struct{}
}

type file struct {
	data    []byte
	modTime time.Time
}

type snapshot struct {
	ref   string
	kind  adapters.SnapshotKind
	files map[string]file
}

// InstanceView is what the fake remembers of an instance. Maps are copies.
type InstanceView struct {
	adapters.Instance
	Installation string
	Template     string
	Resources    adapters.Resources
	Env          map[string]string
	Labels       map[string]string
	// TTLSeconds is the backend expiry the fake keeps (it never acts on it): the
	// Create request's, or the last RenewTTL's. TTLRenewals counts RenewTTL calls.
	TTLSeconds  int64
	TTLRenewals int
}

// Interface checks: the fake must back every feature it declares by default.
var (
	_ adapters.ExecutionAdapter = (*Adapter)(nil)
	_ adapters.Streamer         = (*Adapter)(nil)
	_ adapters.FileSystem       = (*Adapter)(nil)
	_ adapters.FileStreamer     = (*Adapter)(nil)
	_ adapters.Lifecycle        = (*Adapter)(nil)
	_ adapters.Pauser           = (*Adapter)(nil)
	_ adapters.Snapshotter      = (*Adapter)(nil)
	_ adapters.PortExposer      = (*Adapter)(nil)
	_ adapters.TTLRenewer       = (*Adapter)(nil)
)

// New builds an adapter. cfg is taken as is; ParseConfig is where operator input is
// checked.
func New(cfg Config) *Adapter {
	cfg.CreateErrors = slices.Clone(cfg.CreateErrors)
	if cfg.CreateErrorCodes == nil {
		cfg.CreateErrorCodes = InjectableCreateCodes()
	} else {
		cfg.CreateErrorCodes = slices.Clone(cfg.CreateErrorCodes)
	}
	if cfg.DeleteErrorCodes == nil {
		cfg.DeleteErrorCodes = InjectableDeleteCodes()
	} else {
		cfg.DeleteErrorCodes = slices.Clone(cfg.DeleteErrorCodes)
	}
	if cfg.ExecErrorCodes == nil {
		cfg.ExecErrorCodes = InjectableExecCodes()
	} else {
		cfg.ExecErrorCodes = slices.Clone(cfg.ExecErrorCodes)
	}
	if cfg.Features == nil {
		cfg.Features = DefaultFeatures()
	} else {
		cfg.Features = slices.Clone(cfg.Features)
	}
	cfg.Templates = slices.Clone(cfg.Templates)
	cfg.Regions = slices.Clone(cfg.Regions)
	if cfg.Region == "" && len(cfg.Regions) > 0 {
		cfg.Region = cfg.Regions[0]
	}
	if cfg.Trust == "" {
		cfg.Trust = api.TrustPrivate
	}
	a := &Adapter{
		cfg:         cfg,
		sleep:       cfg.Sleep,
		byRef:       map[string]*instance{},
		byID:        map[string]*instance{},
		snapshots:   map[string]*snapshot{},
		createErrs:  cfg.CreateErrors,
		dropsLeft:   cfg.DropCreateResponses,
		listError:   cfg.ListError,
		healthError: cfg.HealthError,
		rng:         rand.New(rand.NewPCG(cfg.FaultSeed, faultStream)),
	}
	if a.sleep == nil {
		a.sleep = timerSleep
	}
	return a
}

// faultStream is the second half of the PCG seed; FaultSeed is the first.
const faultStream = 0x64696666 // "diff"

// chanceLocked reports whether a fault of probability p happens now. A zero rate
// draws nothing, so faults that are off do not shift the others' draws.
func (a *Adapter) chanceLocked(p float64) bool {
	return p > 0 && a.rng.Float64() < p
}

// pickLocked draws one of codes.
func (a *Adapter) pickLocked(codes []api.Code) api.Code {
	if len(codes) == 1 {
		return codes[0]
	}
	return codes[a.rng.IntN(len(codes))]
}

func timerSleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (a *Adapter) Info() adapters.Info {
	return adapters.Info{
		Kind:        Kind,
		Trust:       a.cfg.Trust,
		Isolation:   "none (simulated in memory)",
		Protocol:    adapters.ProtocolVersion,
		Description: "In-memory fake for tests and fault injection; exec echoes the command unless replaced.",
	}
}

func (a *Adapter) Capabilities(context.Context) (adapters.Capabilities, error) {
	return adapters.Capabilities{
		Features:     slices.Clone(a.cfg.Features),
		MaxCPU:       a.cfg.MaxCPU,
		MaxMemoryMiB: a.cfg.MaxMemoryMiB,
		MaxDiskGiB:   a.cfg.MaxDiskGiB,
		Templates:    slices.Clone(a.cfg.Templates),
		Regions:      slices.Clone(a.cfg.Regions),
	}, nil
}

func (a *Adapter) bounded() bool { return a.cfg.TotalCPU > 0 || a.cfg.TotalMemoryMiB > 0 }

func (a *Adapter) Capacity(context.Context) (adapters.Capacity, error) {
	if !a.bounded() {
		return adapters.Capacity{}, nil
	}
	a.mu.Lock()
	cpu, mem := a.freeLocked()
	a.mu.Unlock()
	// One node, so the roomiest node is all of it.
	return adapters.Capacity{Bounded: true, FreeCPU: cpu, FreeMemoryMiB: mem, LargestFreeCPU: cpu, LargestFreeMemoryMiB: mem}, nil
}

func (a *Adapter) freeLocked() (float64, int64) {
	cpu, mem := a.cfg.TotalCPU, a.cfg.TotalMemoryMiB
	if cpu == 0 {
		cpu = unlimited
	}
	if mem == 0 {
		mem = unlimited
	}
	for _, in := range a.byRef {
		cpu -= in.charged.CPU
		mem -= in.charged.MemoryMiB
	}
	return max(cpu, 0), max(mem, 0)
}

func (a *Adapter) Health(context.Context) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.healthError {
		return adapters.Unavailable("fake: injected health failure")
	}
	return nil
}

// Create follows the contract's idempotency rule; see the package documentation for
// the injected faults and the order they apply in.
func (a *Adapter) Create(ctx context.Context, req adapters.CreateRequest) (adapters.Instance, error) {
	a.mu.Lock()
	a.createCalls++
	a.mu.Unlock()
	if err := a.checkCreate(req); err != nil {
		return adapters.Instance{}, err
	}

	a.mu.Lock()
	if len(a.createErrs) > 0 {
		code := a.createErrs[0]
		a.createErrs = a.createErrs[1:]
		a.mu.Unlock()
		return adapters.Instance{}, api.Errorf(code, "fake: injected create failure")
	}
	if a.chanceLocked(a.cfg.CreateErrorRate) {
		code := a.pickLocked(a.cfg.CreateErrorCodes)
		a.mu.Unlock()
		return adapters.Instance{}, api.Errorf(code, "fake: injected create failure (createErrorRate: %s)", code)
	}
	for {
		in, ok := a.byID[req.ID]
		if !ok {
			break
		}
		if in.pub.State != adapters.StatePending || isClosed(in.ready) {
			// SetState can make a created instance pending; it is still the answer.
			drop := a.chanceLocked(a.cfg.DropCreateResponseRate)
			a.mu.Unlock()
			if drop {
				return adapters.Instance{}, droppedByRate()
			}
			return in.pub, nil
		}
		ready := in.ready
		a.mu.Unlock()
		select {
		case <-ready:
		case <-ctx.Done():
			return adapters.Instance{}, interrupted(ctx)
		}
		a.mu.Lock()
	}
	in, err := a.reserveLocked(req)
	latency := a.cfg.CreateLatency
	if err == nil && a.cfg.CreateLatencyJitter > 0 {
		latency += time.Duration(a.rng.Int64N(int64(a.cfg.CreateLatencyJitter) + 1))
	}
	a.mu.Unlock()
	if err != nil {
		return adapters.Instance{}, err
	}

	if latency > 0 {
		err = a.sleep(ctx, latency)
	}

	a.mu.Lock()
	defer a.mu.Unlock()
	defer close(in.ready)
	if a.byRef[in.pub.Ref] != in {
		return adapters.Instance{}, adapters.SandboxFailed("fake: instance %s was deleted while it was being created", in.pub.Ref)
	}
	if err != nil {
		// An aborted creation leaves nothing behind, so a retry starts afresh.
		a.removeLocked(in)
		return adapters.Instance{}, fmt.Errorf("%w: %w", adapters.Unavailable("fake: create interrupted"), err)
	}
	in.pub.State = adapters.StateRunning
	if a.dropsLeft > 0 {
		a.dropsLeft--
		return adapters.Instance{}, adapters.Unavailable("fake: response lost (injected)")
	}
	if a.chanceLocked(a.cfg.DropCreateResponseRate) {
		return adapters.Instance{}, droppedByRate()
	}
	return in.pub, nil
}

// droppedByRate is a Create answer lost after the instance was made or found.
func droppedByRate() error {
	return adapters.Unavailable("fake: response lost (injected, dropCreateResponseRate)")
}

func isClosed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

func interrupted(ctx context.Context) error {
	return fmt.Errorf("%w: %w", adapters.Unavailable("fake: create interrupted"), ctx.Err())
}

// checkCreate holds the checks that need no state: a request failing them can never
// succeed.
func (a *Adapter) checkCreate(req adapters.CreateRequest) error {
	if err := req.Validate(); err != nil {
		return err
	}
	if req.Template != "" && len(a.cfg.Templates) > 0 && !slices.Contains(a.cfg.Templates, req.Template) {
		return adapters.InvalidRequest("fake: template %q is not one of %s", req.Template, strings.Join(a.cfg.Templates, ", "))
	}
	r := req.Resources
	switch {
	case a.cfg.MaxCPU > 0 && r.CPU > a.cfg.MaxCPU:
		return adapters.InvalidRequest("fake: cpu %v is over the limit of %v", r.CPU, a.cfg.MaxCPU)
	case a.cfg.MaxMemoryMiB > 0 && r.MemoryMiB > a.cfg.MaxMemoryMiB:
		return adapters.InvalidRequest("fake: memoryMiB %d is over the limit of %d", r.MemoryMiB, a.cfg.MaxMemoryMiB)
	case a.cfg.MaxDiskGiB > 0 && r.DiskGiB > a.cfg.MaxDiskGiB:
		return adapters.InvalidRequest("fake: diskGiB %d is over the limit of %d", r.DiskGiB, a.cfg.MaxDiskGiB)
	}
	return nil
}

// reserveLocked registers a pending instance, holding its capacity during the
// simulated latency so that concurrent Creates cannot overcommit.
func (a *Adapter) reserveLocked(req adapters.CreateRequest) (*instance, error) {
	files := map[string]file{}
	if req.FromSnapshot != "" {
		s, ok := a.snapshots[req.FromSnapshot]
		if !ok {
			return nil, adapters.InvalidRequest("fake: snapshot %q does not exist", req.FromSnapshot)
		}
		files = copyFiles(s.files)
	}
	charged := adapters.Resources{CPU: req.Resources.CPU, MemoryMiB: req.Resources.MemoryMiB}
	if a.bounded() {
		if charged.CPU == 0 {
			charged.CPU = DefaultCPU
		}
		if charged.MemoryMiB == 0 {
			charged.MemoryMiB = DefaultMemoryMiB
		}
		cpu, mem := a.freeLocked()
		if charged.CPU > cpu || charged.MemoryMiB > mem {
			return nil, adapters.InsufficientCapacity("fake: %v CPU and %d MiB requested, %v CPU and %d MiB free", charged.CPU, charged.MemoryMiB, cpu, mem)
		}
	}
	in := &instance{
		pub: adapters.Instance{
			Ref:       ids.New("fake"),
			SandboxID: req.ID,
			State:     adapters.StatePending,
			Region:    a.cfg.Region,
		},
		installation: req.Installation,
		template:     req.Template,
		resources:    req.Resources,
		charged:      charged,
		env:          maps.Clone(req.Env),
		labels:       adapters.OwnershipLabels(req.Labels, req.ID, req.Installation),
		files:        files,
		ttlSeconds:   req.TTLSeconds,
		ready:        make(chan struct{}),
	}
	a.byRef[in.pub.Ref] = in
	a.byID[req.ID] = in
	return in, nil
}

func (a *Adapter) removeLocked(in *instance) {
	delete(a.byRef, in.pub.Ref)
	if a.byID[in.pub.SandboxID] == in {
		delete(a.byID, in.pub.SandboxID)
	}
}

func (a *Adapter) Get(_ context.Context, ref string) (adapters.Instance, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	in, err := a.lookupLocked(ref)
	if err != nil {
		return adapters.Instance{}, err
	}
	return in.pub, nil
}

func (a *Adapter) lookupLocked(ref string) (*instance, error) {
	in, ok := a.byRef[ref]
	if !ok {
		return nil, adapters.NotFound("fake: instance %q does not exist", ref)
	}
	return in, nil
}

func (a *Adapter) List(_ context.Context, installation string) ([]adapters.Instance, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.listError {
		return nil, adapters.Unavailable("fake: injected list failure")
	}
	if a.chanceLocked(a.cfg.ListErrorRate) {
		return nil, adapters.Unavailable("fake: injected list failure (listErrorRate)")
	}
	out := []adapters.Instance{}
	for _, in := range a.byRef {
		if in.installation == installation {
			out = append(out, in.pub)
		}
	}
	slices.SortFunc(out, func(x, y adapters.Instance) int { return strings.Compare(x.Ref, y.Ref) })
	return out, nil
}

func (a *Adapter) Delete(_ context.Context, ref string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.chanceLocked(a.cfg.DeleteErrorRate) {
		code := a.pickLocked(a.cfg.DeleteErrorCodes)
		return api.Errorf(code, "fake: injected delete failure (deleteErrorRate: %s)", code)
	}
	if in, ok := a.byRef[ref]; ok {
		a.removeLocked(in)
	}
	return nil
}

// RenewTTL records the new expiry of an instance in any state; Inspect shows it. A
// missing instance is not_found.
func (a *Adapter) RenewTTL(_ context.Context, ref string, ttlSeconds int64) error {
	if ttlSeconds < 0 {
		return adapters.InvalidRequest("fake: ttlSeconds must not be negative, not %d", ttlSeconds)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	in, err := a.lookupLocked(ref)
	if err != nil {
		return err
	}
	in.ttlSeconds = ttlSeconds
	in.renewals++
	return nil
}

// Inspect returns what the fake remembers of an instance, for tests.
func (a *Adapter) Inspect(ref string) (InstanceView, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	in, err := a.lookupLocked(ref)
	if err != nil {
		return InstanceView{}, err
	}
	return in.view(), nil
}

func (in *instance) view() InstanceView {
	return InstanceView{
		Instance:     in.pub,
		Installation: in.installation,
		Template:     in.template,
		Resources:    in.resources,
		Env:          maps.Clone(in.env),
		Labels:       maps.Clone(in.labels),
		TTLSeconds:   in.ttlSeconds,
		TTLRenewals:  in.renewals,
	}
}

// CreateCalls counts every Create call, failed ones included.
func (a *Adapter) CreateCalls() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.createCalls
}

// Instances counts the instances that exist now, pending ones included.
func (a *Adapter) Instances() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.byRef)
}

// SetHealthError turns the injected Health failure on or off.
func (a *Adapter) SetHealthError(fail bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.healthError = fail
}

// SetListError turns the injected List failure on or off.
func (a *Adapter) SetListError(fail bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.listError = fail
}

// SetState forces an instance's state, as a backend might change it behind the
// control plane's back (a crash to error, an idle stop). message is what Get reports.
func (a *Adapter) SetState(ref string, state adapters.InstanceState, message string) error {
	switch state {
	case adapters.StatePending, adapters.StateRunning, adapters.StateStopped, adapters.StatePaused, adapters.StateError:
	default:
		return adapters.InvalidRequest("fake: unknown state %q", state)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	in, err := a.lookupLocked(ref)
	if err != nil {
		return err
	}
	in.pub.State = state
	in.pub.Message = message
	return nil
}
