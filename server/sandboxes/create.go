package sandboxes

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/internal/ids"
	"github.com/different-ai/differently/internal/textcut"
	"github.com/different-ai/differently/server/apierr"
	"github.com/different-ai/differently/server/lifecycle"
	"github.com/different-ai/differently/server/placement"
	"github.com/different-ai/differently/server/scheduler"
	"github.com/different-ai/differently/server/store"
)

// DefaultOrg and DefaultProject are where an admin's create lands when it names
// none.
const (
	DefaultOrg     = "default"
	DefaultProject = "default"
)

// DefaultTTLSeconds is the lifetime of a sandbox whose create names no TTL, when the
// policy sets no defaults.ttlSeconds: nothing lives forever unless asked to, with an
// explicit ttlSeconds of 0.
const DefaultTTLSeconds = 24 * 60 * 60

// queueFullRetryAfter is the retry hint, in seconds, of a create refused because the
// queue is full.
const queueFullRetryAfter = 5

// insertTimeout bounds the transaction that stores a new sandbox once the client
// can no longer cut it short.
const insertTimeout = 30 * time.Second

// warmYield is how long a warm sandbox that could not start at once lets tenants'
// creates go before it in the queue: when the pool's starts are the bottleneck (a
// burst drained its warm sandboxes), the creates waiting cold are served first and
// the pool refills after them.
const warmYield = time.Second

// CreateRequest is a sandbox asked for.
type CreateRequest struct {
	// Org and Project name where the sandbox goes; nil leaves it to Tenant.
	Org, Project *string
	// Sandbox is the rest of the request: template, capabilities, resources,
	// labels, env, TTL, placement, the snapshot to restore, the idempotency key and
	// the request's hash (what a retry with the same key must repeat). Create sets
	// its org and project.
	Sandbox store.Sandbox
	// Profile names a stored profile that fills in what the request leaves out.
	Profile string
	// TTLSet says whether the request named a TTL (0, no expiry, included). Without
	// one the profile's applies, or else the policy's default.
	TTLSet bool
}

// Tenant picks the org and project a create lands in: the token's own for a project
// token, which may name no other, and the request's (DefaultOrg and DefaultProject
// when it names none) for an admin.
func Tenant(c Caller, org, project *string) (string, string, error) {
	if !c.Admin {
		if org != nil && *org != c.Org || project != nil && *project != c.Project {
			return "", "", api.Errorf(api.CodeForbidden, "a project token creates sandboxes in its own project only")
		}
		return c.Org, c.Project, nil
	}
	o, pr := DefaultOrg, DefaultProject
	if org != nil {
		o = *org
	}
	if project != nil {
		pr = *project
	}
	if err := api.CheckTenantName("org", o); err != nil {
		return "", "", err
	}
	return o, pr, api.CheckTenantName("project", pr)
}

// Create settles a new sandbox's tenant, profile and snapshot and then creates it
// (create). created is false when the idempotency key named an existing sandbox,
// which is returned instead. started, when not nil, delivers the outcome of the
// Create this replica's scheduler began at once (scheduler.Start).
func (s *Service) Create(ctx context.Context, c Caller, req CreateRequest) (out store.Sandbox, created bool, started <-chan store.Sandbox, err error) {
	sb := req.Sandbox
	if sb.Org, sb.Project, err = Tenant(c, req.Org, req.Project); err != nil {
		return sb, false, nil, err
	}
	if req.Profile != "" {
		if err := ValidProfileName(req.Profile); err != nil {
			return sb, false, nil, err
		}
		if err := s.applyProfile(ctx, &sb, req.Profile, req.TTLSet); err != nil {
			return sb, false, nil, err
		}
	}
	snapshotPool := ""
	if sb.FromSnapshot != "" {
		sn, err := s.Snapshot(ctx, c, sb.FromSnapshot)
		if err != nil {
			return sb, false, nil, err
		}
		if sn.Org != sb.Org || sn.Project != sb.Project {
			// A sandbox restores only its own project's snapshots, even for an admin:
			// the snapshot holds that project's data.
			return sb, false, nil, apierr.Invalid("snapshot %q belongs to another project", sn.ID)
		}
		snapshotPool = sn.Pool
	}
	// Without a TTL from the request or its profile, the policy's default applies. A
	// profile always has one: its 0 means no expiry, as the API document says.
	defaultTTL := !req.TTLSet && req.Profile == ""
	return s.create(ctx, c, sb, snapshotPool, defaultTTL)
}

// applyProfile expands the named profile into a sandbox being created. ttlSet says
// whether the request set ttlSeconds (0, no expiry, included). An unknown profile is
// invalid_request: the request can never succeed as written.
func (s *Service) applyProfile(ctx context.Context, sb *store.Sandbox, name string, ttlSet bool) error {
	p, err := s.st.GetProfile(ctx, name)
	if api.IsCode(err, api.CodeNotFound) {
		return apierr.Invalid("profile %q not found", name)
	}
	if err != nil {
		return fmt.Errorf("get profile: %w", err)
	}
	sb.Profile = p.Name
	sb.Capabilities = append(slices.Clone(p.Capabilities), sb.Capabilities...)
	if sb.Template == "" {
		sb.Template = p.Template
	}
	if sb.Resources.CPU == 0 {
		sb.Resources.CPU = p.Resources.CPU
	}
	if sb.Resources.MemoryMiB == 0 {
		sb.Resources.MemoryMiB = p.Resources.MemoryMiB
	}
	if sb.Resources.DiskGiB == 0 {
		sb.Resources.DiskGiB = p.Resources.DiskGiB
	}
	if len(sb.Placement.AllowedPools) == 0 {
		sb.Placement.AllowedPools = slices.Clone(p.Placement.AllowedPools)
	}
	if len(sb.Placement.Regions) == 0 {
		sb.Placement.Regions = slices.Clone(p.Placement.Regions)
	}
	if !ttlSet {
		sb.TTLSeconds = p.TTLSeconds
	}
	return nil
}

// checkTTL bounds a ttlSeconds: a longer one than api.MaxTTLSeconds would overflow
// the expiry's arithmetic into the past, and the sandbox be ended as expired at once.
func checkTTL(ttl int64) error {
	if ttl < 0 || ttl > api.MaxTTLSeconds {
		return apierr.Invalid("ttlSeconds must be between 0 (no expiry) and %d (ten years)", api.MaxTTLSeconds)
	}
	return nil
}

// checkPlacement bounds what a create's placement names: a pool that could exist
// (one that cannot is refused as unknown anyway, here without quoting all of it) and
// regions of at most api.MaxRegionBytes.
func checkPlacement(pl store.Placement) error {
	for _, name := range pl.AllowedPools {
		if !api.ValidName(name) {
			return apierr.Invalid("placement.allowedPools: %q is not a pool name (1 to 63 lowercase letters, digits and dashes)",
				textcut.Prefix(name, 64))
		}
	}
	for _, region := range pl.Regions {
		if len(region) > api.MaxRegionBytes {
			return apierr.Invalid("placement.regions: a region is longer than %d bytes", api.MaxRegionBytes)
		}
	}
	return nil
}

func validateEnv(env map[string]string) error {
	for k, v := range env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return apierr.Invalid("env name %q is not valid", k)
		}
		if strings.ContainsRune(v, 0) {
			return apierr.Invalid("env value of %q contains a NUL byte", k)
		}
	}
	return nil
}

// PolicyDefaultTTL reads defaults.ttlSeconds of a policy; the admin's policy write
// (server/httpapi/admin.go) checks it with the same function, so a stored policy
// always has a usable value.
func PolicyDefaultTTL(p store.Policy) (int64, error) {
	switch v := p.Defaults["ttlSeconds"].(type) {
	case nil:
		return DefaultTTLSeconds, nil
	case float64:
		if v >= 0 && v <= api.MaxTTLSeconds && v == float64(int64(v)) {
			return int64(v), nil
		}
	case json.Number:
		if n, err := v.Int64(); err == nil && n >= 0 && n <= api.MaxTTLSeconds {
			return n, nil
		}
	}
	return 0, apierr.Invalid("defaults.ttlSeconds must be a whole number of seconds between 0 (no expiry) and %d (ten years)",
		api.MaxTTLSeconds)
}

// storedDefaultTTL is PolicyDefaultTTL for a stored policy, which may have been
// accepted before api.MaxTTLSeconds bounded it: a longer default is held to the bound
// rather than refusing every create that names no TTL for the operator's setting.
func storedDefaultTTL(p store.Policy) (int64, error) {
	switch v := p.Defaults["ttlSeconds"].(type) {
	case float64:
		if v > api.MaxTTLSeconds && v == math.Trunc(v) {
			return api.MaxTTLSeconds, nil
		}
	case json.Number:
		if n, err := v.Int64(); err == nil && n > api.MaxTTLSeconds {
			return api.MaxTTLSeconds, nil
		}
	}
	return PolicyDefaultTTL(p)
}

// create validates a new sandbox, checks that some pool could ever take it, admits
// it (project quota, queue bound) and stores it for the scheduler: straight onto a
// pool of this replica's when one has a start slot free and no sandbox is queued
// before it (started then delivers the outcome of its Create, see
// scheduler.Start), queued otherwise (started is nil). With defaultTTL it takes the
// policy's default lifetime, read with the policy placement needs anyway.
// snapshotPool is the pool of the snapshot it restores, if any. created is false
// when the idempotency key named an existing sandbox, which is returned instead.
func (s *Service) create(ctx context.Context, c Caller, sb store.Sandbox, snapshotPool string, defaultTTL bool) (out store.Sandbox, created bool, started <-chan store.Sandbox, err error) {
	return s.createAs(ctx, c.Actor(), sb, snapshotPool, defaultTTL, true)
}

// createAs is create recorded as by's. With warm, a create that a pool's warm shape
// matches takes one of its ready sandboxes when there is one (claimWarm).
func (s *Service) createAs(ctx context.Context, by lifecycle.Actor, sb store.Sandbox, snapshotPool string, defaultTTL, warm bool) (out store.Sandbox, created bool, started <-chan store.Sandbox, err error) {
	if err := validate(&sb); err != nil {
		return sb, false, nil, err
	}
	sb.ID = ids.New("sbx")
	pctx, endPlacement := s.span(ctx, "sandbox.placement", sb.ID)
	d, req, err := s.placeable(pctx, &sb, snapshotPool, defaultTTL)
	if err == nil && warm {
		var ok bool
		out, created, ok, err = s.claimWarm(pctx, by, sb, d, snapshotPool)
		if ok || err != nil {
			endPlacement(err)
			if err != nil {
				return sb, false, nil, err
			}
			return out, created, nil, checkReplay(sb, out, created)
		}
	}
	var start *scheduler.Start
	var candidates []store.Candidate
	if err == nil {
		// The request's context, not the placement span's: the Create that the
		// reservation starts continues the request's trace beside this step.
		start, candidates, err = s.reserve(ctx, sb, d, req)
	}
	endPlacement(err)
	if err != nil {
		return sb, false, nil, err
	}
	defer start.Release() // unless started below
	now := s.now()
	actx, endAdmission := s.span(ctx, "sandbox.admission", sb.ID)
	out, created, err = s.insert(actx, by, now, sb, start, candidates)
	endAdmission(err)
	if err != nil {
		return sb, false, nil, err
	}
	if err := checkReplay(sb, out, created); err != nil {
		return sb, false, nil, err
	}
	if created {
		if started = start.Start(out); started == nil {
			s.waker.Wake(out.State)
		}
	}
	return out, created, started, nil
}

// validate checks what a create asks for, on its own, and normalises the features.
func validate(sb *store.Sandbox) error {
	caps, err := adapters.ValidateRequestedFeatures(sb.Capabilities)
	if err != nil {
		return err
	}
	sb.Capabilities = caps
	if err := adapters.ValidateLabels(sb.Labels); err != nil {
		return err
	}
	if err := sb.Resources.Validate(); err != nil {
		return err
	}
	if err := checkTTL(sb.TTLSeconds); err != nil {
		return err
	}
	if len(sb.Template) > api.MaxTemplateBytes {
		return apierr.Invalid("template is longer than %d bytes", api.MaxTemplateBytes)
	}
	if err := checkPlacement(sb.Placement); err != nil {
		return err
	}
	if err := checkInitCommands(sb.InitCommands); err != nil {
		return err
	}
	return validateEnv(sb.Env)
}

// placeable asks placement whether some pool could ever take the sandbox, with the
// policy (whose default TTL it applies when defaultTTL), and refuses it when none
// could. A sandbox no pool can take now, but one could later, is kept with the
// reason it waits.
func (s *Service) placeable(ctx context.Context, sb *store.Sandbox, snapshotPool string, defaultTTL bool) (placement.Decision, placement.Request, error) {
	policy, err := s.policy(ctx)
	if err != nil {
		return placement.Decision{}, placement.Request{}, fmt.Errorf("get policy: %w", err)
	}
	if defaultTTL {
		if sb.TTLSeconds, err = storedDefaultTTL(policy); err != nil {
			return placement.Decision{}, placement.Request{}, err
		}
	}
	// Here placement only decides whether some pool could ever take the sandbox. How
	// many sandboxes each pool runs only matters to which pool takes it and when,
	// which the scheduler decides with its own count, so none is made per create.
	req := placement.Request{
		Capabilities: sb.Capabilities, Template: sb.Template, Resources: sb.Resources,
		Placement: sb.Placement, SnapshotPool: snapshotPool,
	}
	d := placement.Place(req, s.pools.Views(), policy, nil)
	if d.Code != "" {
		e := api.Errorf(d.Code, "%s", d.Reason)
		if len(d.Rejected) > 0 {
			e = e.WithDetail("rejected", d.Rejected)
		}
		return d, req, e
	}
	if d.Wait {
		sb.Reason = d.Reason
	}
	return d, req, nil
}

// reserve takes a start slot on this replica's scheduler for a sandbox that may
// start at once, and returns the placement's record for its event. It returns a nil
// Start (the sandbox is queued) when placement said to wait, for a restore (whose
// placement a pass makes, reading the snapshot's backend reference), and when no
// slot is free.
func (s *Service) reserve(ctx context.Context, sb store.Sandbox, d placement.Decision, req placement.Request) (*scheduler.Start, []store.Candidate, error) {
	if s.direct == nil || d.Wait || req.SnapshotPool != "" || sb.FromSnapshot != "" {
		return nil, nil, nil
	}
	ranked, ok, err := s.directPools(ctx, d.Pools, req)
	if err != nil || !ok {
		return nil, nil, err
	}
	return s.direct.Reserve(ctx, ranked), lifecycle.Candidates(ranked, d.Rejected), nil
}

// insert stores the sandbox with its first transitions, admitted in the transaction
// that inserts it: the project's quota, then the bound on the queue. A retried
// create (same Idempotency-Key) skips both. A client that hangs up does not cut the
// transaction short: its COMMIT may already have reached the database, and a
// provisioning row whose Create never started would wait for its claim to lapse.
func (s *Service) insert(ctx context.Context, by lifecycle.Actor, now time.Time, sb store.Sandbox, start *scheduler.Start, candidates []store.Candidate) (store.Sandbox, bool, error) {
	insertCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), insertTimeout)
	defer cancel()
	out, created, err := s.st.CreateSandboxAdmitted(insertCtx, now, sb, func(a store.Admission, ins *store.Sandbox) error {
		if err := store.CheckQuota(sb.Org, sb.Project, a.Quota, a.Usage, sb.Resources); err != nil {
			return err
		}
		if a.Queued >= s.maxQueued {
			// The queue is every tenant's: how many wait is not for this caller to
			// learn, only that it is full.
			return RetryAfter(api.Errorf(api.CodeProviderUnavailable,
				"the queue is full (it holds at most %d sandboxes waiting for a pool); try again later",
				s.maxQueued), queueFullRetryAfter)
		}
		if err := lifecycle.Create(ins, now, by); err != nil {
			return err
		}
		// With others due now, the sandbox stays queued: they were waiting first, and
		// no overtaking them. One waiting out a backoff, or for a pool with no room,
		// does not hold the others back.
		if start != nil && a.Due == 0 {
			return start.Place(ins, candidates)
		}
		if ins.Org == store.WarmOrg {
			// A warm sandbox is for a create to come; a tenant's create that arrives
			// meanwhile is waiting now, and goes first (warmYield).
			ins.NextAttemptAt = now.Add(warmYield)
		}
		return nil
	})
	if err != nil {
		return out, false, fmt.Errorf("create sandbox: %w", err)
	}
	return out, created, nil
}

// checkReplay refuses the answer to a create whose Idempotency-Key named an
// existing sandbox (created false) when that sandbox is not the request's to have.
func checkReplay(sb, out store.Sandbox, created bool) error {
	if created {
		return nil
	}
	if out.Org != sb.Org || out.Project != sb.Project {
		// The store looks keys up within the organisation and project, so this cannot
		// happen; were it to, another tenant's sandbox must not be revealed.
		return fmt.Errorf("idempotency key lookup returned another project's sandbox")
	}
	// A sandbox stored before request hashes were kept has none, and any request
	// repeating its key gets it, as before.
	if out.RequestHash != "" && out.RequestHash != sb.RequestHash {
		return api.Errorf(api.CodeIdempotencyKeyReused,
			"Idempotency-Key %q was first used by a different create request (sandbox %s); "+
				"repeat that request unchanged to get its sandbox, or use a new key for a new one",
			sb.IdempotencyKey, out.ID)
	}
	return nil
}

// directPools returns the pools, best first, on which a create may start at once
// (ok false: it goes through the queue). ranked comes from the policy as the
// Policy option read it, which may be cached and lag a change written on another
// replica for as long as the change feed takes to tell this one. Internal pools do
// not depend on the policy, but an external one is another party's infrastructure,
// allowed only by the policy as it stands: when ranked names one, placement is
// decided again with the policy read afresh, as a pass would.
func (s *Service) directPools(ctx context.Context, ranked []string, req placement.Request) ([]string, bool, error) {
	external := false
	for _, name := range ranked {
		if v, ok := s.pools.View(name); !ok || v.Trust == api.TrustExternal {
			external = true
			break
		}
	}
	if !external {
		return ranked, true, nil
	}
	policy, err := s.st.GetPolicy(ctx)
	if err != nil {
		return nil, false, fmt.Errorf("get policy: %w", err)
	}
	d := placement.Place(req, s.pools.Views(), policy, nil)
	if d.Code != "" || d.Wait {
		// The queue's pass places it, or fails it, with the policy it reads.
		return nil, false, nil
	}
	return d.Pools, true, nil
}

// checkInitCommands bounds what a create records for its client to run.
func checkInitCommands(cmds []string) error {
	if len(cmds) > api.MaxInitCommands {
		return apierr.Invalid("initCommands has %d commands, more than %d", len(cmds), api.MaxInitCommands)
	}
	for i, c := range cmds {
		if len(c) > api.MaxInitCommandBytes {
			return apierr.Invalid("initCommands[%d] is longer than %d bytes", i, api.MaxInitCommandBytes)
		}
	}
	return nil
}
