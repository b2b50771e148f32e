// Package e2b is an E2B-compatible front door to the sandbox service: the control
// plane of E2B's public API (its spec/openapi.yml, kept in the shared specs), enough
// of it that E2B's unmodified SDKs (npm and PyPI "e2b") create, list, connect to,
// time out, pause, resume and kill Differently sandboxes with a Differently project
// token as their API key. The daemon serves it under /e2b; envd, the in-sandbox
// protocol, is served under /e2b/envd by its own package (Options.Envd).
//
// It decides nothing of its own: every call goes to the sandbox service with the
// caller the native API's token check yields (server/httpapi's Backend), and the
// service's typed errors become E2B's error body in one place (statusOf).
//
// The types are written by hand rather than generated from E2B's openapi.yml: that
// document describes about sixty operations with several security schemes, of which
// this package serves eight, and the SDKs send forms it does not list (the v2
// create and connect).
package e2b

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/internal/body"
	"github.com/different-ai/differently/internal/clock"
	"github.com/different-ai/differently/server/lifecycle"
	"github.com/different-ai/differently/server/sandboxes"
	"github.com/different-ai/differently/server/store"
)

// EnvdVersion is the envd version every sandbox reports. E2B's SDKs turn features on
// by it: 0.6.3 is the lowest at which the SDK asks for everything the envd front
// door can do (octet-stream uploads from 0.5.7, file metadata from 0.6.2, entries in
// directory watch events from 0.6.3); what it cannot, such as closing stdin (0.5.2),
// it answers as unimplemented.
const EnvdVersion = "0.6.3"

// ClientID is the deprecated clientID E2B's answers must carry; Differently has no
// client nodes to name.
const ClientID = "differently"

// BaseTemplate is the template E2B's SDKs ask for when given none: the sandbox then
// gets no profile, so the policy's and pool's defaults apply. Any other templateID
// names a Differently profile (see docs/e2b.md).
const BaseTemplate = "base"

// DefaultTimeoutSeconds is E2B's default sandbox timeout when a create names none.
const DefaultTimeoutSeconds = 15

// CreateWait bounds how long a create waits for its sandbox to run: E2B answers a
// create once the sandbox can be used, and the SDKs talk to envd at once.
const CreateWait = time.Minute

// maxBody bounds a request body: every body of this API is a small JSON object.
const maxBody = api.MaxJSONBodyBytes

// Sandboxes is the sandbox service as this package uses it (*sandboxes.Service).
type Sandboxes interface {
	Create(ctx context.Context, c sandboxes.Caller, req sandboxes.CreateRequest) (store.Sandbox, bool, <-chan store.Sandbox, error)
	Sandbox(ctx context.Context, c sandboxes.Caller, id string) (store.Sandbox, error)
	Delete(ctx context.Context, c sandboxes.Caller, id string) (store.Sandbox, <-chan store.Sandbox, error)
	Update(ctx context.Context, c sandboxes.Caller, id string, p sandboxes.Patch) (store.Sandbox, error)
	Operate(ctx context.Context, c sandboxes.Caller, id string, op lifecycle.Op) (store.Sandbox, error)
	List(ctx context.Context, c sandboxes.Caller, f store.SandboxFilter) ([]store.Sandbox, string, error)
	CreateSnapshot(ctx context.Context, c sandboxes.Caller, id string, kind *string) (store.Snapshot, error)
	Snapshots(ctx context.Context, c sandboxes.Caller, sandboxID string) ([]store.Snapshot, error)
	DeleteSnapshot(ctx context.Context, c sandboxes.Caller, id string) error
	Fork(ctx context.Context, c sandboxes.Caller, id string, req sandboxes.ForkRequest) (store.Sandbox, error)
	Snapshot(ctx context.Context, c sandboxes.Caller, id string) (store.Snapshot, error)
	ProfileExists(ctx context.Context, name string) (bool, error)
}

// Options wires the front door.
type Options struct {
	// Sandboxes, Authenticate and Await are required; the daemon passes those of
	// server/httpapi's Backend.
	Sandboxes    Sandboxes
	Authenticate func(ctx context.Context, secret string) (sandboxes.Caller, error)
	Await        func(ctx context.Context, c sandboxes.Caller, id string, want []store.State, timeout time.Duration,
		known *store.Sandbox, done <-chan store.Sandbox) (store.Sandbox, bool, error)
	// BodyTimeout bounds the reading of a request body; 0 means
	// DefaultBodyTimeout. The daemon passes the native API's.
	BodyTimeout time.Duration
	// Secret signs the sandboxes' envdAccessTokens (AccessToken). Required.
	Secret []byte
	// Envd, when set, serves /envd and below (the prefix stripped): the envd front
	// door, whose requests carry an envdAccessToken rather than an API key.
	Envd http.Handler
	// Clock defaults to the system clock.
	Clock clock.Clock
	// Logger defaults to one that discards.
	Logger *slog.Logger
}

type handler struct {
	svc    Sandboxes
	auth   func(ctx context.Context, secret string) (sandboxes.Caller, error)
	await  func(ctx context.Context, c sandboxes.Caller, id string, want []store.State, timeout time.Duration, known *store.Sandbox, done <-chan store.Sandbox) (store.Sandbox, bool, error)
	secret []byte
	// bodyTimeout bounds the reading of a request body (decode).
	bodyTimeout time.Duration
	clock       clock.Clock
	log         *slog.Logger
}

type callerKey struct{}

func callerOf(ctx context.Context) sandboxes.Caller {
	c, _ := ctx.Value(callerKey{}).(sandboxes.Caller)
	return c
}

// NewHandler serves E2B's control-plane API at the root of the handler: the daemon
// mounts it at /e2b with the prefix stripped.
func NewHandler(opts Options) (http.Handler, error) {
	if opts.Sandboxes == nil || opts.Authenticate == nil || opts.Await == nil || len(opts.Secret) == 0 {
		return nil, errMissing
	}
	h := &handler{svc: opts.Sandboxes, auth: opts.Authenticate, await: opts.Await, secret: opts.Secret,
		bodyTimeout: cmp.Or(opts.BodyTimeout, DefaultBodyTimeout), clock: opts.Clock, log: opts.Logger}
	if h.clock == nil {
		h.clock = clock.Real{}
	}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	r := chi.NewRouter()
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusNotFound, apiError{Code: http.StatusNotFound, Message: "no such route in Differently's E2B API: " + r.Method + " " + r.URL.Path})
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusMethodNotAllowed, apiError{Code: http.StatusMethodNotAllowed, Message: "method not allowed"})
	})
	if opts.Envd != nil {
		// envd authenticates each request with the sandbox's envdAccessToken, not
		// an API key, so it is mounted outside the API key check.
		r.Mount("/envd", http.StripPrefix("/envd", opts.Envd))
	}
	r.Group(func(r chi.Router) {
		r.Use(h.authenticate)
		r.Post("/sandboxes", h.create)
		r.Post("/v2/sandboxes", h.create)
		r.Get("/sandboxes", h.listV1)
		r.Get("/v2/sandboxes", h.list)
		r.Get("/sandboxes/{id}", h.get)
		r.Delete("/sandboxes/{id}", h.kill)
		r.Post("/sandboxes/{id}/timeout", h.timeout)
		r.Post("/sandboxes/{id}/pause", h.pause)
		r.Post("/sandboxes/{id}/resume", h.resume)
		r.Post("/sandboxes/{id}/connect", h.connect)
		r.Post("/v2/sandboxes/{id}/connect", h.connect)
		r.Post("/sandboxes/{id}/refreshes", h.refresh)
		r.Post("/sandboxes/{id}/snapshots", h.createSnapshot)
		r.Post("/sandboxes/{id}/fork", h.fork)
		r.Get("/snapshots", h.listSnapshots)
		r.Delete("/templates/{template}", h.deleteTemplate)
		r.Get("/templates/aliases/{alias}", h.templateAlias)
		r.Get("/health", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
		routeUnserved(r)
	})
	return r, nil
}

// authenticate turns X-API-KEY (or a Bearer token) into the caller, with the
// native API's token check.
func (h *handler) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		secret := r.Header.Get("X-API-KEY")
		if secret == "" {
			if scheme, v, ok := strings.Cut(r.Header.Get("Authorization"), " "); ok && strings.EqualFold(scheme, "Bearer") {
				secret = strings.TrimSpace(v)
			}
		}
		if secret == "" {
			w.Header().Set("Connection", "close")
			h.writeError(w, r, api.Errorf(api.CodeUnauthenticated, "an API key is required in X-API-KEY"))
			return
		}
		c, err := h.auth(r.Context(), secret)
		if err != nil {
			if api.IsCode(err, api.CodeUnauthenticated) {
				// As on the native API: a caller without a valid key must not
				// hold a connection open.
				w.Header().Set("Connection", "close")
			}
			h.writeError(w, r, err)
			return
		}
		if r.Body != nil {
			r.Body = http.MaxBytesReader(w, r.Body, maxBody)
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), callerKey{}, c)))
	})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// DefaultBodyTimeout is Options.BodyTimeout's default, the native API's.
const DefaultBodyTimeout = time.Minute

// decode reads a JSON body into v, within the handler's body timeout (a read that
// fails closes the connection, as on the native API). An empty body leaves v as it is when optional;
// unknown fields are ignored, as E2B's SDKs send options this front door does not
// act on (network, mcp, secure) and refusing them would refuse every create.
func (h *handler) decode(w http.ResponseWriter, r *http.Request, v any, optional bool) error {
	data, err := body.ReadAllWithin(w, r.Body, r.ContentLength, h.bodyTimeout)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return api.Errorf(api.CodePayloadTooLarge, "request body is over %d bytes", maxBody)
		}
		return api.Errorf(api.CodeInvalidRequest, "read request body: %v", err)
	}
	if len(data) == 0 {
		if optional {
			return nil
		}
		return api.Errorf(api.CodeInvalidRequest, "a JSON request body is required")
	}
	if err := json.Unmarshal(data, v); err != nil {
		return api.Errorf(api.CodeInvalidRequest, "request body is not valid JSON for this route: %v", err)
	}
	return nil
}
