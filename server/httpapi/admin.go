package httpapi

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/internal/ids"
	"github.com/different-ai/differently/server/apierr"
	"github.com/different-ai/differently/server/reconcile"
	"github.com/different-ai/differently/server/sandboxes"
	"github.com/different-ai/differently/server/store"
	"github.com/different-ai/differently/server/tokens"
)

func (s *Server) GetHealthz(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, Status{Status: "ok"})
}

// GetReadyz checks the database. Migrations are applied when the store opens, so a
// store that answers is a migrated one.
//
// The ping has its own short deadline: a database that accepts connections and
// never answers must make the replica unready, not hang the probe until the load
// balancer gives up on its own.
func (s *Server) GetReadyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
	defer cancel()
	if err := s.st.Ping(ctx); err != nil {
		s.log.Warn("readiness: database unreachable", "error", err)
		s.writeError(w, r, api.Errorf(api.CodeProviderUnavailable, "database unreachable"))
		return
	}
	writeJSON(w, http.StatusOK, Status{Status: "ready"})
}

func (s *Server) GetMetrics(w http.ResponseWriter, r *http.Request) {
	promhttp.HandlerFor(s.gatherer, promhttp.HandlerOpts{}).ServeHTTP(w, r)
}

func toPolicy(p store.Policy) Policy {
	out := Policy{AllowExternal: ptr(p.AllowExternal), ExternalPools: ptr(nonNil(slices.Clone(p.ExternalPools)))}
	if p.Defaults != nil {
		out.Defaults = ptr(maps.Clone(p.Defaults))
	}
	return out
}

func (s *Server) GetPolicy(w http.ResponseWriter, r *http.Request) {
	p, err := s.st.GetPolicy(r.Context())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, toPolicy(p))
}

// PutPolicy replaces the policy. externalPools may name pools that do not exist yet
// (an operator can allow a pool before adding it); the names must be well-formed.
func (s *Server) PutPolicy(w http.ResponseWriter, r *http.Request) {
	var body Policy
	if err := decodeJSON(r, &body, false); err != nil {
		s.writeError(w, r, err)
		return
	}
	p := store.Policy{AllowExternal: deref(body.AllowExternal), Defaults: deref(body.Defaults)}
	if _, err := sandboxes.PolicyDefaultTTL(p); err != nil {
		s.writeError(w, r, err)
		return
	}
	for _, name := range deref(body.ExternalPools) {
		if err := sandboxes.ValidPoolName(name); err != nil {
			s.writeError(w, r, err)
			return
		}
		if !slices.Contains(p.ExternalPools, name) {
			p.ExternalPools = append(p.ExternalPools, name)
		}
	}
	ctx := r.Context()
	// Dropped on this replica at once; the others hear of it through the change feed.
	defer s.cache.forgetPolicy()
	if err := s.st.PutPolicy(ctx, p); err != nil {
		s.writeError(w, r, err)
		return
	}
	// Queued sandboxes waiting for an external pool may be placeable now.
	s.waker.Notify()
	writeJSON(w, http.StatusOK, toPolicy(p))
}

type trustEntry = struct {
	Adapter      string  `json:"adapter"`
	AdapterClaim *string `json:"adapterClaim,omitempty"`
	Isolation    *string `json:"isolation,omitempty"`
	Name         string  `json:"name"`
	Note         *string `json:"note,omitempty"`
	ReceivesWork bool    `json:"receivesWork"`
	Trust        string  `json:"trust"`
}

func (s *Server) GetTrustReport(w http.ResponseWriter, r *http.Request) {
	rep, err := s.poolSvc.Trust(r.Context())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := TrustReport{AllowExternal: rep.AllowExternal, ExternalPools: ptr(nonNil(rep.ExternalPools))}
	out.Pools = make([]trustEntry, 0, len(rep.Pools))
	for _, p := range rep.Pools {
		out.Pools = append(out.Pools, trustEntry{Name: p.Name, Adapter: p.Adapter, Trust: string(p.Trust),
			AdapterClaim: strPtr(p.AdapterClaim), Isolation: strPtr(p.Isolation), ReceivesWork: p.ReceivesWork,
			Note: strPtr(p.Note)})
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) ReconcileNow(w http.ResponseWriter, r *http.Request) {
	rep, err := s.reconcile(r.Context(), principalFrom(r.Context()).tokenID)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if rep.Pools == nil {
		rep.Pools = []reconcile.PoolReport{}
	}
	// reconcile.Report's JSON is the ReconcileReport schema.
	writeJSON(w, http.StatusOK, rep)
}

// reconcile runs one pass on this replica's reconciler, for the API and the front
// doors (Backend.Reconcile), recorded as asked for by token tokenID.
func (s *Server) reconcile(ctx context.Context, tokenID string) (reconcile.Report, error) {
	if s.rec == nil {
		return reconcile.Report{}, api.Errorf(api.CodeProviderUnavailable, "the reconciler is not running on this replica")
	}
	rep, err := s.rec.ReconcileBy(ctx, tokenID)
	if errors.Is(err, reconcile.ErrPassRunning) {
		// Passes never overlap; this one may run as soon as the other replica's ends.
		if e := api.AsError(err); e != nil {
			err = retryAfter(e, int(reconcile.PassRetryAfter/time.Second))
		}
	}
	return rep, err
}

// ListReconcilePasses pages through the recorded passes, newest first. It reads the
// store, not this replica's reconciler, so every replica shows every pass, and one
// without a reconciler too.
func (s *Server) ListReconcilePasses(w http.ResponseWriter, r *http.Request, params ListReconcilePassesParams) {
	f := store.ReconcilePassFilter{Cursor: deref(params.Cursor)}
	var err error
	if f.Limit, err = pageLimit(params.Limit); err != nil {
		s.writeError(w, r, err)
		return
	}
	items, next, err := s.reconcilePasses(r.Context(), f)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := ReconcilePassList{Items: make([]ReconcilePass, 0, len(items)), NextCursor: strPtr(next)}
	for _, p := range items {
		out.Items = append(out.Items, toReconcilePass(p))
	}
	writeJSON(w, http.StatusOK, out)
}

// reconcilePasses lists the recorded passes, for the API and the front doors
// (Backend.ReconcilePasses).
func (s *Server) reconcilePasses(ctx context.Context, f store.ReconcilePassFilter) ([]store.ReconcilePass, string, error) {
	return s.st.ListReconcilePasses(ctx, f)
}

func toReconcilePass(p store.ReconcilePass) ReconcilePass {
	out := ReconcilePass{Id: p.ID, StartedAt: p.StartedAt, EndedAt: p.EndedAt, Replica: p.Replica,
		Trigger: ReconcilePassTrigger(p.Trigger), TokenId: strPtr(p.TokenID), Error: strPtr(p.Error),
		Pools: make([]ReconcilePoolReport, 0, len(p.Pools))}
	for _, pr := range p.Pools {
		out.Pools = append(out.Pools, ReconcilePoolReport{Pool: pr.Pool, Skipped: strPtr(pr.Skipped),
			OrphansDeleted: optList(pr.OrphansDeleted), Adopted: optList(pr.Adopted), Requeued: optList(pr.Requeued),
			Lost: optList(pr.Lost), StateChanged: optList(pr.StateChanged), Duplicates: optList(pr.Duplicates),
			Errors: optList(pr.Errors)})
	}
	return out
}

// optList leaves an empty list out of the JSON, as reconcile.Report's own encoding
// does.
func optList(l []string) *[]string {
	if len(l) == 0 {
		return nil
	}
	return &l
}

func (s *Server) ListTokens(w http.ResponseWriter, r *http.Request) {
	toks, err := s.st.ListTokens(r.Context())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := TokenList{Items: make([]Token, 0, len(toks))}
	for _, t := range toks {
		out.Items = append(out.Items, toToken(t))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) CreateToken(w http.ResponseWriter, r *http.Request) {
	var body TokenCreate
	if err := decodeJSON(r, &body, false); err != nil {
		s.writeError(w, r, err)
		return
	}
	tok := store.Token{ID: ids.New("tok"), Scope: string(body.Scope), Name: deref(body.Name)}
	switch body.Scope {
	case TokenCreateScopeAdmin:
		if body.Org != nil || body.Project != nil {
			s.writeError(w, r, apierr.Invalid("an admin token has no org or project"))
			return
		}
	case TokenCreateScopeProject:
		tok.Org, tok.Project = DefaultOrg, deref(body.Project)
		if body.Org != nil {
			tok.Org = *body.Org
		}
		if tok.Project == "" {
			s.writeError(w, r, apierr.Invalid("a project token needs a project"))
			return
		}
		if err := api.CheckTenantName("org", tok.Org); err != nil {
			s.writeError(w, r, err)
			return
		}
		if err := api.CheckTenantName("project", tok.Project); err != nil {
			s.writeError(w, r, err)
			return
		}
	default:
		s.writeError(w, r, apierr.Invalid("scope must be %q or %q", store.ScopeAdmin, store.ScopeProject))
		return
	}
	if len(tok.Name) > 255 {
		s.writeError(w, r, apierr.Invalid("name is longer than 255 bytes"))
		return
	}
	switch ttl := deref(body.TtlSeconds); {
	case ttl < 0 || ttl > api.MaxTTLSeconds:
		s.writeError(w, r, apierr.Invalid("ttlSeconds must be between 0 (no expiry) and %d", api.MaxTTLSeconds))
		return
	case ttl > 0:
		tok.ExpiresAt = ptr(s.now().Add(time.Duration(ttl) * time.Second))
	}
	secret, err := tokens.New()
	if err != nil {
		s.writeError(w, r, fmt.Errorf("generate secret: %w", err))
		return
	}
	tok.Hash = tokens.Hash(secret)
	out, err := s.st.CreateToken(r.Context(), s.now(), tok)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, TokenCreated{Token: toToken(out), Secret: secret})
}

func (s *Server) DeleteToken(w http.ResponseWriter, r *http.Request, id string) {
	if err := s.st.DeleteToken(r.Context(), id); err != nil {
		s.writeError(w, r, err)
		return
	}
	s.forgetToken(id)
	w.WriteHeader(http.StatusNoContent)
}
