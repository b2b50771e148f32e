package e2b

import (
	"encoding/json"
	"errors"

	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/server/apierr"
	"github.com/different-ai/differently/server/lifecycle"
	"github.com/different-ai/differently/server/sandboxes"
	"github.com/different-ai/differently/server/store"
)

var errMissing = errors.New("e2b: Options.Sandboxes, Authenticate, Await and Secret are required")

// sandbox is E2B's Sandbox schema: the answer of a create, resume and connect.
type sandbox struct {
	TemplateID         string  `json:"templateID"`
	SandboxID          string  `json:"sandboxID"`
	Alias              *string `json:"alias,omitempty"`
	ClientID           string  `json:"clientID"`
	EnvdVersion        string  `json:"envdVersion"`
	EnvdAccessToken    string  `json:"envdAccessToken"`
	TrafficAccessToken *string `json:"trafficAccessToken"`
	Domain             *string `json:"domain"`
}

// detail is E2B's SandboxDetail (GET /sandboxes/{id}) and, without the token and
// domain, its ListedSandbox.
type detail struct {
	TemplateID      string            `json:"templateID"`
	Alias           *string           `json:"alias,omitempty"`
	SandboxID       string            `json:"sandboxID"`
	ClientID        string            `json:"clientID"`
	StartedAt       time.Time         `json:"startedAt"`
	EndAt           time.Time         `json:"endAt"`
	EnvdVersion     string            `json:"envdVersion"`
	EnvdAccessToken string            `json:"envdAccessToken,omitempty"`
	Domain          *string           `json:"domain"`
	CPUCount        int               `json:"cpuCount"`
	MemoryMB        int64             `json:"memoryMB"`
	DiskSizeMB      int64             `json:"diskSizeMB"`
	Metadata        map[string]string `json:"metadata"`
	State           string            `json:"state"`
	// Lifecycle is SandboxDetail's only: ListedSandbox has none.
	Lifecycle *lifecycleInfo `json:"lifecycle,omitempty"`
}

// lifecycleInfo is E2B's SandboxLifecycle. A Differently sandbox ends when its
// timeout passes and is never resumed by traffic.
type lifecycleInfo struct {
	AutoResume bool   `json:"autoResume"`
	OnTimeout  string `json:"onTimeout"`
}

// noExpiry is the endAt of a sandbox without a TTL: E2B's schema requires a time.
var noExpiry = time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC)

// templateOf is the templateID a sandbox was created from: its profile, else the
// snapshot it was restored from, else BaseTemplate.
func templateOf(sb store.Sandbox) string {
	switch {
	case sb.Profile != "":
		return sb.Profile
	case sb.FromSnapshot != "":
		return sb.FromSnapshot
	}
	return BaseTemplate
}

// stateOf is a live sandbox's state as E2B names it: only running and paused
// exist there. A sandbox on its way up is running (it is, as soon as a client can
// reach it), and a stopped one, which resume starts again, is paused.
func stateOf(s store.State) string {
	switch s {
	case store.StatePaused, store.StateStopped:
		return "paused"
	}
	return "running"
}

// gone says whether E2B would no longer know the sandbox: E2B forgets a killed
// sandbox, so an ending or ended one answers 404 like a missing one.
func gone(s store.State) bool { return s.IsTerminal() || s == store.StateTerminating }

func (h *handler) toSandbox(sb store.Sandbox) sandbox {
	return sandbox{TemplateID: templateOf(sb), SandboxID: sb.ID, ClientID: ClientID, EnvdVersion: EnvdVersion,
		EnvdAccessToken: AccessToken(h.secret, sb.ID)}
}

func toDetail(sb store.Sandbox) detail {
	end := noExpiry
	if sb.ExpiresAt != nil {
		end = sb.ExpiresAt.UTC()
	}
	md := sb.Labels
	if md == nil {
		md = map[string]string{}
	}
	return detail{
		TemplateID: templateOf(sb), SandboxID: sb.ID, ClientID: ClientID, StartedAt: sb.CreatedAt.UTC(), EndAt: end,
		EnvdVersion: EnvdVersion, CPUCount: int(math.Ceil(sb.Resources.CPU)), MemoryMB: sb.Resources.MemoryMiB,
		DiskSizeMB: sb.Resources.DiskGiB * 1024, Metadata: md, State: stateOf(sb.State),
	}
}

// live is the caller's sandbox id unless it is ending or ended (then not found).
func (h *handler) live(r *http.Request, id string) (store.Sandbox, error) {
	sb, err := h.svc.Sandbox(r.Context(), callerOf(r.Context()), id)
	if err != nil {
		return sb, err
	}
	if gone(sb.State) {
		return sb, api.Errorf(api.CodeNotFound, "sandbox %q not found", id)
	}
	return sb, nil
}

// newSandbox is E2B's NewSandbox, the fields this front door acts on.
type newSandbox struct {
	TemplateID string            `json:"templateID"`
	Timeout    *int64            `json:"timeout"`
	AutoPause  *bool             `json:"autoPause"`
	Metadata   map[string]string `json:"metadata"`
	EnvVars    map[string]string `json:"envVars"`
	AutoResume json.RawMessage   `json:"autoResume"`
	Volumes    json.RawMessage   `json:"volumeMounts"`
}

func checkTimeout(t *int64) (int64, error) {
	if t == nil {
		return DefaultTimeoutSeconds, nil
	}
	if *t < 0 || *t > math.MaxInt32 {
		return 0, apierr.Invalid("timeout must be between 0 and %d seconds", math.MaxInt32)
	}
	return *t, nil
}

func (h *handler) create(w http.ResponseWriter, r *http.Request) {
	var body newSandbox
	if err := h.decode(w, r, &body, false); err != nil {
		h.writeError(w, r, err)
		return
	}
	if body.AutoPause != nil && *body.AutoPause {
		h.writeError(w, r, apierr.Invalid("autoPause is not supported: a Differently sandbox ends when its timeout passes"))
		return
	}
	if len(body.AutoResume) > 0 && string(body.AutoResume) != "null" {
		h.writeError(w, r, apierr.Invalid("autoResume is not supported: resume a paused sandbox with connect"))
		return
	}
	if len(body.Volumes) > 0 && string(body.Volumes) != "null" && string(body.Volumes) != "[]" {
		h.writeError(w, r, apierr.Invalid("volumeMounts are not supported"))
		return
	}
	ttl, err := checkTimeout(body.Timeout)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	req := sandboxes.CreateRequest{
		Sandbox: store.Sandbox{Labels: body.Metadata, Env: body.EnvVars, TTLSeconds: ttl},
		TTLSet:  true,
	}
	switch body.TemplateID {
	case "":
		h.writeError(w, r, apierr.Invalid("templateID is required"))
		return
	case BaseTemplate:
	default:
		if isSnapshotID(body.TemplateID) {
			req.Sandbox.FromSnapshot = body.TemplateID
		} else {
			req.Profile = body.TemplateID
		}
	}
	ctx := r.Context()
	c := callerOf(ctx)
	out, _, started, err := h.svc.Create(ctx, c, req)
	if err != nil {
		if req.Sandbox.FromSnapshot != "" && api.IsCode(err, api.CodeNotFound) {
			// As for a profile that does not exist: the templateID is bad.
			err = apierr.Invalid("snapshot %q not found", req.Sandbox.FromSnapshot)
		}
		h.writeError(w, r, err)
		return
	}
	sb, ok, err := h.await(ctx, c, out.ID, []store.State{store.StateRunning}, CreateWait, &out, started)
	switch {
	case err != nil:
		h.writeError(w, r, err)
		return
	case !ok:
		return // the client left
	case sb.State == store.StateFailed:
		h.writeError(w, r, api.Errorf(api.CodeSandboxFailed, "sandbox %s failed to start: %s", sb.ID, sb.Reason))
		return
	case gone(sb.State):
		h.writeError(w, r, api.Errorf(api.CodeNotFound, "sandbox %s ended while starting", sb.ID))
		return
	}
	// A sandbox still starting after CreateWait is answered as created: it exists,
	// and envd answers for it once it runs.
	writeJSON(w, http.StatusCreated, h.toSandbox(sb))
}

func (h *handler) get(w http.ResponseWriter, r *http.Request) {
	sb, err := h.live(r, chi.URLParam(r, "id"))
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	d := toDetail(sb)
	d.EnvdAccessToken = AccessToken(h.secret, sb.ID)
	d.Lifecycle = &lifecycleInfo{AutoResume: false, OnTimeout: "kill"}
	writeJSON(w, http.StatusOK, d)
}

// maxListLimit is E2B's paginationLimit maximum, and its default.
const maxListLimit = 100

// listQuery is a list request: the store's filter, and what the store cannot
// filter on, applied to each page (so a page may come out short, even empty, with
// a next token still).
type listQuery struct {
	filter       store.SandboxFilter
	template     string    // keep sandboxes of this templateID only
	startedAfter time.Time // keep sandboxes started at or after it
}

func (q listQuery) keep(sb store.Sandbox) bool {
	if q.template != "" && templateOf(sb) != q.template {
		return false
	}
	return q.startedAfter.IsZero() || !sb.CreatedAt.Before(q.startedAfter)
}

// listFilter reads E2B's list parameters: metadata, a query string of its own
// (k=v&k2=v2, its keys and values encoded) sent as one parameter, so encoded twice
// on the wire; state, comma-separated running and paused; template; startedAfter;
// order; limit and nextToken.
func listFilter(q url.Values) (listQuery, error) {
	lq := listQuery{filter: store.SandboxFilter{Limit: maxListLimit, Cursor: q.Get("nextToken")}, template: q.Get("template")}
	f := &lq.filter
	if md := q.Get("metadata"); md != "" {
		pairs, err := url.ParseQuery(md)
		if err != nil {
			return lq, apierr.Invalid("metadata filter %q is not an encoded query string: %v", md, err)
		}
		f.Labels = map[string]string{}
		for k, vs := range pairs {
			if k == "" || len(vs) != 1 {
				return lq, apierr.Invalid("metadata filter names key %q with %d values; give each key one value", k, len(vs))
			}
			f.Labels[k] = vs[0]
		}
	}
	states := []store.State{store.StateQueued, store.StateProvisioning, store.StateRunning, store.StatePaused, store.StateStopped}
	if vals := q["state"]; len(vals) > 0 {
		states = nil
		for _, v := range vals {
			for s := range strings.SplitSeq(v, ",") {
				switch strings.TrimSpace(s) {
				case "running":
					states = append(states, store.StateQueued, store.StateProvisioning, store.StateRunning)
				case "paused":
					states = append(states, store.StatePaused, store.StateStopped)
				default:
					return lq, apierr.Invalid("unknown state %q: E2B's states are running and paused", s)
				}
			}
		}
	}
	f.States = states
	if l := q.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > maxListLimit {
			return lq, apierr.Invalid("limit must be a whole number from 1 to %d", maxListLimit)
		}
		f.Limit = n
	}
	if v := q.Get("startedAfter"); v != "" {
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			return lq, apierr.Invalid("startedAfter %q is not an RFC 3339 time", v)
		}
		lq.startedAfter = t
	}
	// The native API lists oldest first and can list no other way: E2B's default,
	// newest first, is not what comes, and asking for it is refused rather than
	// answered in the other order.
	switch o := q.Get("order"); o {
	case "", "asc":
	case "desc":
		return lq, apierr.Invalid("order=desc is not supported: sandboxes are listed oldest first (order=asc)")
	default:
		return lq, apierr.Invalid("order %q is not asc or desc", o)
	}
	return lq, nil
}

func (h *handler) list(w http.ResponseWriter, r *http.Request) {
	lq, err := listFilter(r.URL.Query())
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	items, next, err := h.svc.List(r.Context(), callerOf(r.Context()), lq.filter)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	out := make([]detail, 0, len(items))
	for _, sb := range items {
		if lq.keep(sb) {
			out = append(out, toDetail(sb))
		}
	}
	if next != "" {
		w.Header().Set("X-Next-Token", next)
	}
	writeJSON(w, http.StatusOK, out)
}

// listV1 is the deprecated GET /sandboxes: running sandboxes only, without paging
// (its first page).
func (h *handler) listV1(w http.ResponseWriter, r *http.Request) {
	q := url.Values{"metadata": r.URL.Query()["metadata"], "state": {"running"}}
	r2 := r.Clone(r.Context())
	r2.URL.RawQuery = q.Encode()
	h.list(w, r2)
}

// kill is DELETE: 204 once the sandbox is ending, 404 when it is unknown or already
// ending (E2B's SDKs make kill() return false on 404).
func (h *handler) kill(w http.ResponseWriter, r *http.Request) {
	id := chi.URLParam(r, "id")
	if _, err := h.live(r, id); err != nil {
		h.writeError(w, r, err)
		return
	}
	if _, _, err := h.svc.Delete(r.Context(), callerOf(r.Context()), id); err != nil {
		h.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

type timeoutBody struct {
	Timeout *int64 `json:"timeout"`
}

// timeout sets the sandbox to end timeout seconds from now (the service's TTL,
// which counts from now for a live sandbox).
func (h *handler) timeout(w http.ResponseWriter, r *http.Request) {
	var body timeoutBody
	if err := h.decode(w, r, &body, false); err != nil {
		h.writeError(w, r, err)
		return
	}
	if body.Timeout == nil {
		h.writeError(w, r, apierr.Invalid("timeout is required"))
		return
	}
	ttl, err := checkTimeout(body.Timeout)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	id := chi.URLParam(r, "id")
	if _, err := h.live(r, id); err != nil {
		h.writeError(w, r, err)
		return
	}
	if _, err := h.svc.Update(r.Context(), callerOf(r.Context()), id, sandboxes.Patch{TTLSeconds: &ttl}); err != nil {
		h.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (h *handler) pause(w http.ResponseWriter, r *http.Request) {
	id := chi.URLParam(r, "id")
	sb, err := h.live(r, id)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	if stateOf(sb.State) == "paused" {
		h.writeError(w, r, apierr.Conflict("sandbox %s is already paused", id))
		return
	}
	if _, err := h.svc.Operate(r.Context(), callerOf(r.Context()), id, lifecycle.OpPause); err != nil {
		h.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// wake resumes a paused sandbox, or starts a stopped one.
func (h *handler) wake(r *http.Request, sb store.Sandbox) (store.Sandbox, error) {
	op := lifecycle.OpResume
	if sb.State == store.StateStopped {
		op = lifecycle.OpStart
	}
	return h.svc.Operate(r.Context(), callerOf(r.Context()), sb.ID, op)
}

type resumeBody struct {
	Timeout *int64 `json:"timeout"`
}

// resume is the deprecated POST /sandboxes/{id}/resume: 409 unless paused.
func (h *handler) resume(w http.ResponseWriter, r *http.Request) {
	var body resumeBody
	if err := h.decode(w, r, &body, true); err != nil {
		h.writeError(w, r, err)
		return
	}
	ttl, err := checkTimeout(body.Timeout)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	sb, err := h.live(r, chi.URLParam(r, "id"))
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	if stateOf(sb.State) != "paused" {
		h.writeError(w, r, apierr.Conflict("sandbox %s is not paused", sb.ID))
		return
	}
	if sb, err = h.wake(r, sb); err == nil {
		sb, err = h.svc.Update(r.Context(), callerOf(r.Context()), sb.ID, sandboxes.Patch{TTLSeconds: &ttl})
	}
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, h.toSandbox(sb))
}

// connect returns the sandbox, resuming it first when paused (201; 200 when it ran
// already), and makes it live at least timeout seconds from now: a later end it
// had already is kept.
func (h *handler) connect(w http.ResponseWriter, r *http.Request) {
	var body timeoutBody
	if err := h.decode(w, r, &body, true); err != nil {
		h.writeError(w, r, err)
		return
	}
	ttl, err := checkTimeout(body.Timeout)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	ctx := r.Context()
	c := callerOf(ctx)
	sb, err := h.live(r, chi.URLParam(r, "id"))
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	status := http.StatusOK
	switch sb.State {
	case store.StatePaused, store.StateStopped:
		if sb, err = h.wake(r, sb); err != nil {
			h.writeError(w, r, err)
			return
		}
		status = http.StatusCreated
	case store.StateQueued, store.StateProvisioning:
		var ok bool
		if sb, ok, err = h.await(ctx, c, sb.ID, []store.State{store.StateRunning}, CreateWait, &sb, nil); err != nil || !ok {
			if err != nil {
				h.writeError(w, r, err)
			}
			return
		}
	}
	if extends(sb, ttl, h.clock.Now()) {
		if sb, err = h.svc.Update(ctx, c, sb.ID, sandboxes.Patch{TTLSeconds: &ttl}); err != nil {
			h.writeError(w, r, err)
			return
		}
	}
	writeJSON(w, status, h.toSandbox(sb))
}

type refreshBody struct {
	Duration *int64 `json:"duration"`
}

// maxRefreshSeconds is the most a refresh extends a sandbox by, E2B's bound.
const maxRefreshSeconds = 3600

// refresh is the older POST /sandboxes/{id}/refreshes: the sandbox lives at least
// duration seconds (default DefaultTimeoutSeconds) more; as with connect, a later
// end it had already is kept.
func (h *handler) refresh(w http.ResponseWriter, r *http.Request) {
	var body refreshBody
	if err := h.decode(w, r, &body, true); err != nil {
		h.writeError(w, r, err)
		return
	}
	ttl := int64(DefaultTimeoutSeconds)
	if body.Duration != nil {
		if ttl = *body.Duration; ttl < 0 || ttl > maxRefreshSeconds {
			h.writeError(w, r, apierr.Invalid("duration must be between 0 and %d seconds", maxRefreshSeconds))
			return
		}
	}
	sb, err := h.live(r, chi.URLParam(r, "id"))
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	// A refresh of 0 is no time at all, not the TTL of 0 that means no expiry.
	if ttl > 0 && extends(sb, ttl, h.clock.Now()) {
		if _, err := h.svc.Update(r.Context(), callerOf(r.Context()), sb.ID, sandboxes.Patch{TTLSeconds: &ttl}); err != nil {
			h.writeError(w, r, err)
			return
		}
	}
	w.WriteHeader(http.StatusNoContent)
}

// extends says whether a TTL of ttl seconds from now ends sb later than it ends
// now (a sandbox without expiry never ends; a TTL of 0 means the same).
func extends(sb store.Sandbox, ttl int64, now time.Time) bool {
	if sb.ExpiresAt == nil && sb.TTLSeconds == 0 {
		return false
	}
	if ttl == 0 {
		return true
	}
	if sb.ExpiresAt == nil {
		return true
	}
	return now.Add(time.Duration(ttl) * time.Second).After(*sb.ExpiresAt)
}
