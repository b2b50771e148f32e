package httpapi

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/different-ai/differently/server/apierr"
	"github.com/different-ai/differently/server/sandboxes"
	"github.com/different-ai/differently/server/store"
)

// maxIdempotencyKey matches the document's maxLength, which the generated binder does
// not check.
const maxIdempotencyKey = 255

// loadSandbox returns a sandbox the caller of ctx may see (the service's Sandbox).
func (s *Server) loadSandbox(ctx context.Context, id string) (store.Sandbox, error) {
	return s.svc.Sandbox(ctx, callerOf(ctx), id)
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
		s.writeError(w, r, apierr.Invalid("Idempotency-Key is longer than %d bytes", maxIdempotencyKey))
		return
	}
	wait, err := preferWait(params.Prefer)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	sb := store.Sandbox{
		Template:       deref(body.Template),
		Capabilities:   deref(body.Capabilities),
		Resources:      deref(body.Resources),
		Labels:         deref(body.Labels),
		Env:            deref(body.Env),
		TTLSeconds:     deref(body.TtlSeconds),
		FromSnapshot:   deref(body.FromSnapshot),
		InitCommands:   deref(body.InitCommands),
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
	ctx := r.Context()
	out, created, started, err := s.svc.Create(ctx, callerOf(ctx), sandboxes.CreateRequest{
		Org: body.Org, Project: body.Project, Sandbox: sb,
		Profile: deref(body.Profile), TTLSet: body.TtlSeconds != nil,
	})
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
		return "", fmt.Errorf("encode create request: %w", err)
	}
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}

// DefaultTTLSeconds is the lifetime of a sandbox whose create names no TTL, when the
// policy sets no defaults.ttlSeconds (the service's, sandboxes.DefaultTTLSeconds).
const DefaultTTLSeconds = sandboxes.DefaultTTLSeconds

func (s *Server) GetSandbox(w http.ResponseWriter, r *http.Request, id SandboxID) {
	sb, err := s.loadSandbox(r.Context(), id)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, s.toSandbox(sb))
}

// pageLimit reads a listing's limit parameter: 0 (the store's default) when absent.
func pageLimit(limit *int) (int, error) {
	if limit != nil && (*limit < 1 || *limit > store.MaxLimit) {
		return 0, apierr.Invalid("limit must be between 1 and %d", store.MaxLimit)
	}
	return deref(limit), nil
}

// projectParam reads a listing's project parameter: org/project, or a project name
// in any organisation.
func projectParam(p *string) (org, project string) {
	if org, project, ok := strings.Cut(deref(p), "/"); ok {
		return org, project
	}
	return "", deref(p)
}

func (s *Server) ListSandboxes(w http.ResponseWriter, r *http.Request, params ListSandboxesParams) {
	p := principalFrom(r.Context())
	f := store.SandboxFilter{Pool: deref(params.Pool), Cursor: deref(params.Cursor)}
	var err error
	if f.Limit, err = pageLimit(params.Limit); err != nil {
		s.writeError(w, r, err)
		return
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
			s.writeError(w, r, apierr.Invalid("label filter %q is not key=value", l))
			return
		}
		if f.Labels == nil {
			f.Labels = map[string]string{}
		}
		f.Labels[k] = v
	}
	// The service confines a project token to its own project; another project
	// looks like one without sandboxes.
	f.Org, f.Project = projectParam(params.Project)
	items, next, err := s.svc.List(r.Context(), p.caller(), f)
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
	ctx := r.Context()
	out, err := s.svc.Update(ctx, callerOf(ctx), id, sandboxes.Patch{Labels: body.Labels, TTLSeconds: body.TtlSeconds})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, s.toSandbox(out))
}

// DeleteSandbox marks the sandbox terminating (the service's Delete, which also
// hands it to this replica's scheduler when it can) and answers 202, after waiting
// as a Prefer header asks.
func (s *Server) DeleteSandbox(w http.ResponseWriter, r *http.Request, id SandboxID, params DeleteSandboxParams) {
	wait, err := preferWait(params.Prefer)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	ctx := r.Context()
	out, started, err := s.svc.Delete(ctx, callerOf(ctx), id)
	if err != nil {
		s.writeError(w, r, err)
		return
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
				return nil, apierr.Invalid("unknown state %q", st)
			}
			out = append(out, store.State(st))
		}
	}
	return out, nil
}
