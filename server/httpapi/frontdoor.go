package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/server/pooladmin"
	"github.com/different-ai/differently/server/reconcile"
	"github.com/different-ai/differently/server/sandboxes"
	"github.com/different-ai/differently/server/store"
)

// Backend is what this API lends a front door that serves another protocol over the
// same sandboxes (server/e2b): the one sandbox service, the one token check and the
// one wait, so that a front door decides nothing about tenancy, tokens or state
// changes on its own.
type Backend struct {
	// Sandboxes is the sandbox service behind this API's sandbox routes.
	Sandboxes *sandboxes.Service
	// Pools is the pool service behind the admin pool routes. It does not check
	// the caller: a front door lends it to admins only.
	Pools *pooladmin.Service
	// Reconcile runs one reconcile pass now, as POST /v1/admin/reconcile does (the
	// same errors: provider_unavailable when no reconciler runs on this replica,
	// reconcile.ErrPassRunning while another pass runs), recorded as asked for by
	// token tokenID. Admins only.
	Reconcile func(ctx context.Context, tokenID string) (reconcile.Report, error)
	// ReconcilePasses lists the recorded reconcile passes, newest first, as GET
	// /v1/admin/reconcile/passes does. Admins only.
	ReconcilePasses func(ctx context.Context, f store.ReconcilePassFilter) ([]store.ReconcilePass, string, error)
	// Authenticate is the caller holding a token secret, checked exactly as a
	// Bearer token on this API (through the same cache, marking the token used).
	// A secret naming no usable token is an unauthenticated *api.Error.
	Authenticate func(ctx context.Context, secret string) (sandboxes.Caller, error)
	// Await waits up to timeout for sandbox id to be in one of want or a terminal
	// state, as the Prefer: wait of this API does; ok is false when ctx ended
	// first. known and done may be nil (see Server.await).
	Await func(ctx context.Context, c sandboxes.Caller, id string, want []store.State, timeout time.Duration,
		known *store.Sandbox, done <-chan store.Sandbox) (sb store.Sandbox, ok bool, err error)
	// BodyTimeout bounds the reading of a JSON request body, as on this API
	// (Options.BodyReadTimeout), so a client that sends a body slowly cannot hold a
	// request open.
	BodyTimeout time.Duration
}

// FrontDoor is a handler served under Prefix (such as "/e2b") instead of this API's
// routes. It answers its own errors and checks its own credentials; the metrics and
// the panic recovery of this API still wrap it.
type FrontDoor struct {
	Prefix string
	Build  func(Backend) (http.Handler, error)
}

func (s *Server) backend() Backend {
	return Backend{
		Sandboxes:       s.svc,
		Pools:           s.poolSvc,
		Reconcile:       s.reconcile,
		ReconcilePasses: s.reconcilePasses,
		Authenticate: func(ctx context.Context, secret string) (sandboxes.Caller, error) {
			p, err := s.principalOf(ctx, secret, api.Errorf(api.CodeUnauthenticated, "a valid API key is required"))
			return p.caller(), err
		},
		Await: func(ctx context.Context, c sandboxes.Caller, id string, want []store.State, timeout time.Duration,
			known *store.Sandbox, done <-chan store.Sandbox) (store.Sandbox, bool, error) {
			return s.await(ctx, c, id, want, timeout, known, done)
		},
		BodyTimeout: s.bodyTimeout,
	}
}

// withFrontDoors serves each front door under its prefix and everything else with
// next.
func (s *Server) withFrontDoors(next http.Handler, doors []FrontDoor) (http.Handler, error) {
	if len(doors) == 0 {
		return next, nil
	}
	type mount struct {
		prefix string
		h      http.Handler
	}
	var mounts []mount
	for _, d := range doors {
		if !strings.HasPrefix(d.Prefix, "/") || strings.HasSuffix(d.Prefix, "/") || d.Build == nil {
			return nil, fmt.Errorf("httpapi: front door prefix %q must start and not end with /, and have a Build", d.Prefix)
		}
		h, err := d.Build(s.backend())
		if err != nil {
			return nil, fmt.Errorf("httpapi: front door %s: %w", d.Prefix, err)
		}
		mounts = append(mounts, mount{d.Prefix, s.instrument(s.recoverer(h))})
		s.doors = append(s.doors, d.Prefix)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for _, m := range mounts {
			if under(r.URL.Path, m.prefix) {
				m.h.ServeHTTP(w, r)
				return
			}
		}
		next.ServeHTTP(w, r)
	}), nil
}

func under(path, prefix string) bool {
	return path == prefix || strings.HasPrefix(path, prefix+"/")
}

// doorOf is the prefix of the front door that serves path, "" when none does.
func (s *Server) doorOf(path string) string {
	for _, p := range s.doors {
		if under(path, p) {
			return p
		}
	}
	return ""
}
