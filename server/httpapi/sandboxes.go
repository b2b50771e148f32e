package httpapi

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"maps"
	"math"
	"net/http"
	"strings"
	"time"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/internal/ids"
	"github.com/different-ai/differently/internal/textcut"
	"github.com/different-ai/differently/server/lifecycle"
	"github.com/different-ai/differently/server/placement"
	"github.com/different-ai/differently/server/scheduler"
	"github.com/different-ai/differently/server/store"
)

// maxIdempotencyKey matches the document's maxLength, which the generated binder does
// not check.
const maxIdempotencyKey = 255

// errUnchanged aborts an UpdateSandbox whose callback found nothing to write.
var errUnchanged = errors.New("unchanged")

// updateSandbox is the API's one way to change a sandbox: store.UpdateSandbox, in
// a transaction shared with the replica's other writes when there is a Batcher.
func (s *Server) updateSandbox(ctx context.Context, id string, fn func(*store.Sandbox) error) (store.Sandbox, error) {
	if s.writes != nil {
		return s.writes.UpdateSandbox(ctx, id, fn)
	}
	return s.st.UpdateSandbox(ctx, id, s.now(), fn)
}

// loadSandbox returns a sandbox the caller may see. Another project's sandbox answers
// exactly like a missing one.
func (s *Server) loadSandbox(ctx context.Context, id string) (store.Sandbox, error) {
	sb, err := s.st.GetSandbox(ctx, id)
	if api.IsCode(err, api.CodeNotFound) {
		return store.Sandbox{}, notFound("sandbox", id)
	}
	if err != nil {
		return store.Sandbox{}, errorf("get sandbox %s: %w", id, err)
	}
	if !principalFrom(ctx).owns(sb.Org, sb.Project) {
		return store.Sandbox{}, notFound("sandbox", id)
	}
	return sb, nil
}

// tenant picks the org and project a create lands in: the token's own for a project
// token, the body's (default "default") for an admin.
func tenant(p principal, org, project *string) (string, string, error) {
	if !p.admin {
		if org != nil && *org != p.org || project != nil && *project != p.project {
			return "", "", api.Errorf(api.CodeForbidden, "a project token creates sandboxes in its own project only")
		}
		return p.org, p.project, nil
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

// checkTTL bounds a ttlSeconds: a longer one than api.MaxTTLSeconds would overflow
// the expiry's arithmetic into the past, and the sandbox be ended as expired at once.
func checkTTL(ttl int64) error {
	if ttl < 0 || ttl > api.MaxTTLSeconds {
		return invalid("ttlSeconds must be between 0 (no expiry) and %d (ten years)", api.MaxTTLSeconds)
	}
	return nil
}

// checkPlacement bounds what a create's placement names: a pool that could exist
// (one that cannot is refused as unknown anyway, here without quoting all of it) and
// regions of at most api.MaxRegionBytes.
func checkPlacement(pl store.Placement) error {
	for _, name := range pl.AllowedPools {
		if !api.ValidName(name) {
			return invalid("placement.allowedPools: %q is not a pool name (1 to 63 lowercase letters, digits and dashes)",
				textcut.Prefix(name, 64))
		}
	}
	for _, region := range pl.Regions {
		if len(region) > api.MaxRegionBytes {
			return invalid("placement.regions: a region is longer than %d bytes", api.MaxRegionBytes)
		}
	}
	return nil
}

func validateEnv(env map[string]string) error {
	for k, v := range env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return invalid("env name %q is not valid", k)
		}
		if strings.ContainsRune(v, 0) {
			return invalid("env value of %q contains a NUL byte", k)
		}
	}
	return nil
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

func (s *Server) CreateSandbox(w http.ResponseWriter, r *http.Request, params CreateSandboxParams) {
	var body SandboxCreate
	if err := decodeJSON(r, &body, false); err != nil {
		s.writeError(w, r, err)
		return
	}
	key := deref(params.IdempotencyKey)
	if len(key) > maxIdempotencyKey {
		s.writeError(w, r, invalid("Idempotency-Key is longer than %d bytes", maxIdempotencyKey))
		return
	}
	wait, err := preferWait(params.Prefer)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	ctx := r.Context()
	org, project, err := tenant(principalFrom(ctx), body.Org, body.Project)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	sb := store.Sandbox{
		Org:            org,
		Project:        project,
		Template:       deref(body.Template),
		Capabilities:   deref(body.Capabilities),
		Resources:      deref(body.Resources),
		Labels:         deref(body.Labels),
		Env:            deref(body.Env),
		TTLSeconds:     deref(body.TtlSeconds),
		FromSnapshot:   deref(body.FromSnapshot),
		IdempotencyKey: key,
	}
	if key != "" {
		if sb.RequestHash, err = createRequestHash(body); err != nil {
			s.writeError(w, r, err)
			return
		}
	}
	if pl := body.Placement; pl != nil {
		sb.Placement = store.Placement{AllowedPools: deref(pl.AllowedPools), Regions: deref(pl.Regions)}
	}
	if name := deref(body.Profile); name != "" {
		if err := validProfileName(name); err != nil {
			s.writeError(w, r, err)
			return
		}
		if err := s.applyProfile(ctx, &sb, name, body.TtlSeconds != nil); err != nil {
			s.writeError(w, r, err)
			return
		}
	}
	snapshotPool := ""
	if sb.FromSnapshot != "" {
		sn, err := s.loadSnapshot(ctx, sb.FromSnapshot)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		if sn.Org != org || sn.Project != project {
			// A sandbox restores only its own project's snapshots, even for an admin:
			// the snapshot holds that project's data.
			s.writeError(w, r, invalid("snapshot %q belongs to another project", sn.ID))
			return
		}
		snapshotPool = sn.Pool
	}
	// Without a TTL from the request or its profile, the policy's default applies. A
	// profile always has one: its 0 means no expiry, as the API document says.
	defaultTTL := body.TtlSeconds == nil && deref(body.Profile) == ""
	out, created, started, err := s.queueSandbox(ctx, sb, snapshotPool, defaultTTL)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	status := http.StatusAccepted
	if !created {
		status = http.StatusOK
	}
	s.applyWait(w, r, status, wait, out, store.StateRunning, started)
}

// createRequestHash names a create request for its Idempotency-Key: SHA-256 of the
// decoded body encoded again, so that spacing and the order of keys, which
// change nothing, do not tell two requests apart, while any value that does change
// something does. Headers (Prefer) are not part of it: a retry may wait differently.
func createRequestHash(body SandboxCreate) (string, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return "", errorf("encode create request: %w", err)
	}
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}

// DefaultTTLSeconds is the lifetime of a sandbox whose create names no TTL, when the
// policy sets no defaults.ttlSeconds: nothing lives forever unless asked to, with an
// explicit ttlSeconds of 0.
const DefaultTTLSeconds = 24 * 60 * 60

// policyDefaultTTL reads defaults.ttlSeconds of a policy; PutPolicy checks it with
// the same function, so a stored policy always has a usable value.
func policyDefaultTTL(p store.Policy) (int64, error) {
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
	return 0, invalid("defaults.ttlSeconds must be a whole number of seconds between 0 (no expiry) and %d (ten years)",
		api.MaxTTLSeconds)
}

// storedDefaultTTL is policyDefaultTTL for a stored policy, which PutPolicy may have
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
	return policyDefaultTTL(p)
}

// queueFullRetryAfter is the Retry-After of a create refused because the queue is full.
const queueFullRetryAfter = 5

// queueSandbox validates a new sandbox, checks that some pool could ever take it,
// admits it (project quota, queue bound) and stores it for the scheduler: straight
// onto a pool of this replica's when one has a start slot free and no sandbox is
// queued before it (started then delivers the outcome of its Create, see
// scheduler.Start), queued otherwise (started is nil). With defaultTTL it takes the
// policy's default lifetime, read with the policy placement needs anyway. created is
// false when the idempotency key named an existing sandbox, which is returned
// instead.
func (s *Server) queueSandbox(ctx context.Context, sb store.Sandbox, snapshotPool string, defaultTTL bool) (out store.Sandbox, created bool, started <-chan store.Sandbox, err error) {
	caps, err := adapters.ValidateRequestedFeatures(sb.Capabilities)
	if err != nil {
		return sb, false, nil, err
	}
	sb.Capabilities = caps
	if err := adapters.ValidateLabels(sb.Labels); err != nil {
		return sb, false, nil, err
	}
	if err := sb.Resources.Validate(); err != nil {
		return sb, false, nil, err
	}
	if err := checkTTL(sb.TTLSeconds); err != nil {
		return sb, false, nil, err
	}
	if len(sb.Template) > api.MaxTemplateBytes {
		return sb, false, nil, invalid("template is longer than %d bytes", api.MaxTemplateBytes)
	}
	if err := checkPlacement(sb.Placement); err != nil {
		return sb, false, nil, err
	}
	if err := validateEnv(sb.Env); err != nil {
		return sb, false, nil, err
	}
	policy, err := s.policy(ctx)
	if err != nil {
		return sb, false, nil, errorf("get policy: %w", err)
	}
	if defaultTTL {
		if sb.TTLSeconds, err = storedDefaultTTL(policy); err != nil {
			return sb, false, nil, err
		}
	}
	// Here placement only decides whether some pool could ever take the sandbox. How
	// many sandboxes each pool runs only matters to which pool takes it and when,
	// which the scheduler decides with its own count, so none is made per create.
	placementRequest := placement.Request{
		Capabilities: sb.Capabilities, Template: sb.Template, Resources: sb.Resources,
		Placement: sb.Placement, SnapshotPool: snapshotPool,
	}
	d := placement.Place(placementRequest, s.pools.Views(), policy, nil)
	if d.Code != "" {
		e := api.Errorf(d.Code, "%s", d.Reason)
		if len(d.Rejected) > 0 {
			e = e.WithDetail("rejected", d.Rejected)
		}
		return sb, false, nil, e
	}
	if d.Wait {
		sb.Reason = d.Reason
	}
	now := s.now()
	sb.ID = ids.New("sbx")
	// A sandbox restored from a snapshot goes through the queue, whose placement
	// reads the snapshot's backend reference.
	var start *scheduler.Start
	var candidates []store.Candidate
	if s.direct != nil && !d.Wait && snapshotPool == "" && sb.FromSnapshot == "" {
		if ranked, ok, err := s.directPools(ctx, d.Pools, placementRequest); err != nil {
			return sb, false, nil, err
		} else if ok {
			start = s.direct.Reserve(ranked)
			candidates = lifecycle.Candidates(ranked, d.Rejected)
		}
	}
	by := actor(ctx)
	defer start.Release() // unless started below
	// Admission, in the transaction that inserts: the project's quota, then the bound
	// on the queue. A retried create (same Idempotency-Key) skips both. A client that
	// hangs up does not cut the transaction short: its COMMIT may already have
	// reached the database, and a provisioning row whose Create never started would
	// wait for its claim to lapse.
	insertCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), insertTimeout)
	defer cancel()
	out, created, err = s.st.CreateSandboxAdmitted(insertCtx, now, sb, func(a store.Admission, ins *store.Sandbox) error {
		if err := store.CheckQuota(sb.Org, sb.Project, a.Quota, a.Usage, sb.Resources); err != nil {
			return err
		}
		if a.Queued >= s.maxQueued {
			// The queue is every tenant's: how many wait is not for this caller to
			// learn, only that it is full.
			return retryAfter(api.Errorf(api.CodeProviderUnavailable,
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
		return nil
	})
	if err != nil {
		return sb, false, nil, errorf("create sandbox: %w", err)
	}
	if !created && (out.Org != sb.Org || out.Project != sb.Project) {
		// The store looks keys up within the organisation and project, so this cannot
		// happen; were it to, another tenant's sandbox must not be revealed.
		return sb, false, nil, errorf("idempotency key lookup returned another project's sandbox")
	}
	// A sandbox stored before request hashes were kept has none, and any request
	// repeating its key gets it, as before.
	if !created && out.RequestHash != "" && out.RequestHash != sb.RequestHash {
		return sb, false, nil, api.Errorf(api.CodeIdempotencyKeyReused,
			"Idempotency-Key %q was first used by a different create request (sandbox %s); "+
				"repeat that request unchanged to get its sandbox, or use a new key for a new one",
			sb.IdempotencyKey, out.ID)
	}
	if created {
		if started = start.Start(out); started == nil {
			s.waker.Wake(out.State)
		}
	}
	return out, created, started, nil
}

// insertTimeout bounds the transaction that stores a new sandbox once the client
// can no longer cut it short.
const insertTimeout = 30 * time.Second

// directPools returns the pools, best first, on which a create may start at once
// (ok false: it goes through the queue). ranked comes from the cached policy, which
// may lag a change written on another replica for as long as the change feed takes
// to tell this one. Internal pools do not depend on the policy, but an external one
// is another party's infrastructure, allowed only by the policy as it stands: when
// ranked names one, placement is decided again with the policy read afresh, as a
// pass would.
func (s *Server) directPools(ctx context.Context, ranked []string, req placement.Request) ([]string, bool, error) {
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
		return nil, false, errorf("get policy: %w", err)
	}
	d := placement.Place(req, s.pools.Views(), policy, nil)
	if d.Code != "" || d.Wait {
		// The queue's pass places it, or fails it, with the policy it reads.
		return nil, false, nil
	}
	return d.Pools, true, nil
}

func (s *Server) GetSandbox(w http.ResponseWriter, r *http.Request, id SandboxID) {
	sb, err := s.loadSandbox(r.Context(), id)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, s.toSandbox(sb))
}

func (s *Server) ListSandboxes(w http.ResponseWriter, r *http.Request, params ListSandboxesParams) {
	p := principalFrom(r.Context())
	f := store.SandboxFilter{Pool: deref(params.Pool), Cursor: deref(params.Cursor)}
	if params.Limit != nil {
		if *params.Limit < 1 || *params.Limit > store.MaxLimit {
			s.writeError(w, r, invalid("limit must be between 1 and %d", store.MaxLimit))
			return
		}
		f.Limit = *params.Limit
	}
	states, err := parseStates(deref(params.State))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	f.States = states
	for _, l := range deref(params.Label) {
		k, v, ok := strings.Cut(l, "=")
		if !ok || k == "" {
			s.writeError(w, r, invalid("label filter %q is not key=value", l))
			return
		}
		if f.Labels == nil {
			f.Labels = map[string]string{}
		}
		f.Labels[k] = v
	}
	if p.admin {
		f.Project = deref(params.Project)
	} else {
		if params.Project != nil && *params.Project != p.project {
			// Another project looks like one without sandboxes.
			writeJSON(w, http.StatusOK, SandboxList{Items: []Sandbox{}})
			return
		}
		f.Org, f.Project = p.org, p.project
	}
	items, next, err := s.st.ListSandboxes(r.Context(), f)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := SandboxList{Items: make([]Sandbox, 0, len(items)), NextCursor: strPtr(next)}
	for _, sb := range items {
		out.Items = append(out.Items, s.toSandbox(sb))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) PatchSandbox(w http.ResponseWriter, r *http.Request, id SandboxID) {
	var body SandboxPatch
	if err := decodeJSON(r, &body, false); err != nil {
		s.writeError(w, r, err)
		return
	}
	if body.Labels != nil {
		if err := adapters.ValidateLabels(*body.Labels); err != nil {
			s.writeError(w, r, err)
			return
		}
	}
	if body.TtlSeconds != nil {
		if err := checkTTL(*body.TtlSeconds); err != nil {
			s.writeError(w, r, err)
			return
		}
	}
	ctx := r.Context()
	current, err := s.loadSandbox(ctx, id)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if body.TtlSeconds != nil {
		if err := s.renewBackendTTL(ctx, current, *body.TtlSeconds); err != nil {
			s.writeError(w, r, err)
			return
		}
	}
	now := s.now()
	out, err := s.updateSandbox(ctx, id, func(sb *store.Sandbox) error {
		if sb.State.IsTerminal() || sb.State == store.StateTerminating {
			return conflict("sandbox is %s", sb.State)
		}
		if body.Labels != nil {
			sb.Labels = maps.Clone(*body.Labels)
		}
		if body.TtlSeconds != nil {
			sb.TTLSeconds = *body.TtlSeconds
			// A sandbox not yet running gets its expiry when it starts running; one
			// that runs counts the new TTL from now.
			switch sb.State {
			case store.StateRunning, store.StateStopped, store.StatePaused:
				sb.ExpiresAt = nil
				if sb.TTLSeconds > 0 {
					sb.ExpiresAt = ptr(store.ExpiresAt(now, sb.TTLSeconds))
				}
			}
		}
		return nil
	})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, s.toSandbox(out))
}

// renewBackendTTL moves the backend's own expiry of a live sandbox, where the adapter
// keeps one, before the database records the new TTL: if the backend refuses, nothing
// changes; if the database write then fails, the backend merely holds the instance
// longer than the control plane will, which the control plane's own expiry ends.
func (s *Server) renewBackendTTL(ctx context.Context, sb store.Sandbox, ttl int64) error {
	switch sb.State {
	case store.StateRunning, store.StateStopped, store.StatePaused:
	default:
		return nil
	}
	if sb.BackendRef == "" {
		return nil
	}
	view, ok := s.pools.View(sb.Pool)
	if !ok || view.Adapter == nil {
		return nil
	}
	renewer, ok := view.Adapter.(adapters.TTLRenewer)
	if !ok {
		return nil
	}
	return renewer.RenewTTL(ctx, sb.BackendRef, ttl)
}

// DeleteSandbox marks the sandbox terminating; the scheduler deletes the backend
// instance (if any) and moves it to terminated. One path for every state keeps a
// delete racing a provisioning attempt safe: the scheduler sees the terminating
// state under its row lock. In the same transaction, a sandbox with nothing to
// delete is terminated at once, and one with an instance is handed to this
// replica's scheduler, which deletes it as soon as the transaction commits
// (scheduler.Delete); otherwise a pass takes it.
func (s *Server) DeleteSandbox(w http.ResponseWriter, r *http.Request, id SandboxID, params DeleteSandboxParams) {
	wait, err := preferWait(params.Prefer)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	ctx := r.Context()
	var del *scheduler.Delete
	if s.direct != nil {
		del = s.direct.ReserveDelete()
	}
	defer del.Release() // unless started below
	var seen store.Sandbox
	now := s.now()
	out, err := s.updateSandbox(ctx, id, func(cur *store.Sandbox) error {
		if !principalFrom(ctx).owns(cur.Org, cur.Project) {
			return notFound("sandbox", id)
		}
		seen = *cur
		if cur.State.IsTerminal() || cur.State == store.StateTerminating {
			return errUnchanged
		}
		if err := lifecycle.Terminate(cur, "deleted through the API", now, actor(ctx)); err != nil {
			return err
		}
		del.Prepare(cur, now, actor(ctx))
		return nil
	})
	var started <-chan store.Sandbox
	switch {
	case errors.Is(err, errUnchanged):
		out = seen
	case api.IsCode(err, api.CodeNotFound):
		// The same answer for a missing sandbox and another project's.
		s.writeError(w, r, notFound("sandbox", id))
		return
	case err != nil:
		s.writeError(w, r, errorf("delete sandbox %s: %w", id, err))
		return
	default:
		if started = del.Start(out); started == nil {
			s.waker.Wake(out.State)
		}
	}
	s.applyWait(w, r, http.StatusAccepted, wait, out, store.StateTerminated, started)
}

// parseStates reads a repeated, possibly comma-separated state parameter.
func parseStates(vals []SandboxState) ([]store.State, error) {
	var out []store.State
	for _, v := range vals {
		for _, st := range strings.Split(string(v), ",") {
			st = strings.TrimSpace(st)
			if !store.State(st).Valid() {
				return nil, invalid("unknown state %q", st)
			}
			out = append(out, store.State(st))
		}
	}
	return out, nil
}
