package httpapi

import (
	"context"
	"crypto/subtle"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/server/sandboxes"
	"github.com/different-ai/differently/server/store"
	"github.com/different-ai/differently/server/tokens"
)

// DefaultOrg and DefaultProject are where admin creates land when the body names none
// (the sandbox service decides that: sandboxes.Tenant), and the organisation a
// project token gets when created without one.
const (
	DefaultOrg     = sandboxes.DefaultOrg
	DefaultProject = sandboxes.DefaultProject
)

// touchInterval bounds how often a token's lastUsedAt is written: once a minute is
// precise enough for an operator deciding whether a token is still in use, and spares
// the database a write per request.
const touchInterval = time.Minute

// touchTimeout bounds that write, which no longer ends with the request.
const touchTimeout = 5 * time.Second

// readyTimeout bounds the database ping of /readyz.
const readyTimeout = 2 * time.Second

// publicPaths answer without a token: probes and scrapers do not hold one.
var publicPaths = map[string]bool{"/healthz": true, "/readyz": true, "/metrics": true}

// principal is who is calling: an admin, or one project's token.
type principal struct {
	tokenID string
	admin   bool
	org     string
	project string
}

type principalKey struct{}

// caller is the principal as the sandbox service takes it: passed to each call, so
// that the service never reads identity from a request's context.
func (p principal) caller() sandboxes.Caller {
	return sandboxes.Caller{TokenID: p.tokenID, Admin: p.admin, Org: p.org, Project: p.project}
}

// callerOf is the caller of the request whose context ctx is.
func callerOf(ctx context.Context) sandboxes.Caller { return principalFrom(ctx).caller() }

func principalFrom(ctx context.Context) principal {
	p, _ := ctx.Value(principalKey{}).(principal)
	return p
}

func (s *Server) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if publicPaths[r.URL.Path] {
			next.ServeHTTP(w, r)
			return
		}
		p, err := s.principal(r)
		if err != nil {
			// A caller without a valid token gets its answer and loses the
			// connection: kept alive, it would hold one of the maxConnections
			// (conn.go) until the idle timeout, and a few such callers could keep
			// everyone out, probes included.
			closeAfterAnswer(w)
			s.writeError(w, r, err)
			return
		}
		if (r.URL.Path == "/v1/admin" || strings.HasPrefix(r.URL.Path, "/v1/admin/")) && !p.admin {
			s.writeError(w, r, api.Errorf(api.CodeForbidden, "this route needs an admin token"))
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), principalKey{}, p)))
	})
}

func (s *Server) principal(r *http.Request) (principal, error) {
	unauth := api.Errorf(api.CodeUnauthenticated, "a valid bearer token is required")
	scheme, secret, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	secret = strings.TrimSpace(secret)
	if !ok || !strings.EqualFold(scheme, "Bearer") || secret == "" {
		return principal{}, unauth
	}
	return s.principalOf(r.Context(), secret, unauth)
}

// principalOf is who holds the token secret: the one check of a token, behind the
// Bearer header of this API and the X-API-KEY of the E2B front door (Backend).
// unauth is the answer for a secret that names no usable token.
func (s *Server) principalOf(ctx context.Context, secret string, unauth *api.Error) (principal, error) {
	if secret == "" {
		return principal{}, unauth
	}
	hash := tokens.Hash(secret)
	tok, err := s.tokenByHash(ctx, hash)
	if api.IsCode(err, api.CodeNotFound) {
		return principal{}, unauth
	}
	if err != nil {
		return principal{}, fmt.Errorf("look up token: %w", err)
	}
	// The lookup was by hash already; comparing again in constant time keeps a
	// driver that matched loosely (a prefix, a collation) from letting anyone in.
	if subtle.ConstantTimeCompare(tok.Hash, hash) != 1 {
		return principal{}, unauth
	}
	// An expired token is as good as an unknown one: the same answer, so that the
	// caller learns nothing about the secret from it.
	if tok.ExpiresAt != nil && !s.now().Before(*tok.ExpiresAt) {
		return principal{}, unauth
	}
	s.touch(ctx, tok.ID)
	p := principal{tokenID: tok.ID, admin: tok.Scope == store.ScopeAdmin}
	if !p.admin {
		if tok.Scope != store.ScopeProject || tok.Project == "" {
			return principal{}, unauth
		}
		p.org, p.project = tok.Org, tok.Project
		if p.org == "" {
			p.org = DefaultOrg
		}
	}
	return p, nil
}

// touchCache remembers when each token's lastUsedAt was last written by this replica.
type touchCache struct {
	mu   sync.Mutex
	last map[string]time.Time
}

func (s *Server) touch(ctx context.Context, id string) {
	now := s.now()
	c := &s.touches
	c.mu.Lock()
	if c.last == nil {
		c.last = map[string]time.Time{}
	}
	if t, ok := c.last[id]; ok && now.Sub(t) < touchInterval {
		c.mu.Unlock()
		return
	}
	c.last[id] = now
	c.mu.Unlock()
	// lastUsedAt is bookkeeping: a failed write must not fail the request.
	tctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), touchTimeout)
	defer cancel()
	if err := s.st.TouchToken(tctx, id, now); err != nil {
		s.log.Warn("touch token", "token", id, "error", err)
	}
}

func (s *Server) forgetToken(id string) {
	s.cache.forgetToken(id)
	s.touches.mu.Lock()
	delete(s.touches.last, id)
	s.touches.mu.Unlock()
}
