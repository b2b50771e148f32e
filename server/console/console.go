// Package console is the operator console in the browser, served by the daemon
// under /ui (docs/console.md). Its pages are rendered on the server from
// html/template; one small script (static/console.js) refreshes the live parts, and
// everything the pages load is embedded in the binary.
//
// The console is a front door of server/httpapi (httpapi.FrontDoor): it calls the
// same transport-free services the HTTP API calls (server/sandboxes for sandboxes,
// server/pooladmin for pools and the trust report, the API's reconcile for a pass
// now) with the caller its token authenticates as, so a project token sees its own
// project only, exactly as on the API, and no request reaches an adapter by another
// path.
//
// Signing in trades a token for a session: the token stays on the server, the
// browser holds a random session ID in an HttpOnly, SameSite=Strict cookie. Every
// POST carries the session's CSRF token and must come from this origin.
package console

import (
	"cmp"
	"context"
	"embed"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/internal/clock"
	"github.com/different-ai/differently/server/pooladmin"
	"github.com/different-ai/differently/server/reconcile"
	"github.com/different-ai/differently/server/sandboxes"
	"github.com/different-ai/differently/server/store"
)

// Prefix is where the daemon serves the console.
const Prefix = "/ui"

// Defaults of Options.
const (
	DefaultIdleTimeout = 30 * time.Minute
	DefaultMaxAge      = 12 * time.Hour
	DefaultMaxSessions = 1024
	DefaultRefresh     = 2 * time.Second
)

// cookieName holds the session ID; csrfField is the form field of the CSRF token.
const (
	cookieName = "differently_console"
	csrfField  = "csrf"
)

// maxForm bounds a posted form: a token, a CSRF token and a TTL fit many times over.
const maxForm = 16 << 10

// securityHeaders go on every answer under Prefix. The CSP allows this origin's
// script and style files and nothing inline, so an injected tag cannot run.
var securityHeaders = map[string]string{
	"Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; " +
		"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
	"X-Frame-Options":            "DENY",
	"X-Content-Type-Options":     "nosniff",
	"Referrer-Policy":            "same-origin",
	"Cross-Origin-Opener-Policy": "same-origin",
}

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Options wires the console to the daemon's services (httpapi.Backend).
type Options struct {
	// Sandboxes and Authenticate are required.
	Sandboxes *sandboxes.Service
	// Authenticate is the caller holding a token secret, checked as the API checks
	// a Bearer token.
	Authenticate func(ctx context.Context, secret string) (sandboxes.Caller, error)
	// Pools serves the pool and trust pages (admins only); nil leaves them out.
	Pools *pooladmin.Service
	// Reconcile runs a pass now (admins only), recorded as asked for by token
	// tokenID; nil leaves the action out.
	Reconcile func(ctx context.Context, tokenID string) (reconcile.Report, error)
	// ReconcilePasses lists the recorded passes, newest first (admins only); nil
	// leaves the reconcile page without them.
	ReconcilePasses func(ctx context.Context, f store.ReconcilePassFilter) ([]store.ReconcilePass, string, error)
	// IdleTimeout ends a session unused that long, MaxAge one that old; past
	// MaxSessions, signing in drops the least recently used.
	IdleTimeout, MaxAge time.Duration
	MaxSessions         int
	// Refresh is how often the live parts of a page are fetched again.
	Refresh time.Duration
	// Clock defaults to the system clock.
	Clock clock.Clock
	// Logger defaults to one that discards.
	Logger *slog.Logger
}

// Console serves the console's pages.
type Console struct {
	svc       *sandboxes.Service
	auth      func(ctx context.Context, secret string) (sandboxes.Caller, error)
	pools     *pooladmin.Service
	reconcile func(ctx context.Context, tokenID string) (reconcile.Report, error)
	passes    func(ctx context.Context, f store.ReconcilePassFilter) ([]store.ReconcilePass, string, error)
	sessions  *sessions
	refresh   time.Duration
	clock     clock.Clock
	log       *slog.Logger
	pages     pages
	mux       *http.ServeMux
}

// New builds the console's handler, which expects the full paths under Prefix.
func New(opts Options) (*Console, error) {
	if opts.Sandboxes == nil || opts.Authenticate == nil {
		return nil, errors.New("console: Options.Sandboxes and Options.Authenticate are required")
	}
	c := &Console{
		svc: opts.Sandboxes, auth: opts.Authenticate, pools: opts.Pools, reconcile: opts.Reconcile,
		passes: opts.ReconcilePasses,
		sessions: newSessions(cmp.Or(opts.IdleTimeout, DefaultIdleTimeout), cmp.Or(opts.MaxAge, DefaultMaxAge),
			cmp.Or(opts.MaxSessions, DefaultMaxSessions)),
		refresh: cmp.Or(opts.Refresh, DefaultRefresh),
		clock:   opts.Clock, log: opts.Logger,
	}
	if c.clock == nil {
		c.clock = clock.Real{}
	}
	if c.log == nil {
		c.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	var err error
	if c.pages, err = parsePages(); err != nil {
		return nil, err
	}
	c.routes()
	return c, nil
}

func (c *Console) routes() {
	m := http.NewServeMux()
	m.Handle("GET "+Prefix+"/static/", http.StripPrefix(Prefix, http.HandlerFunc(serveStatic)))
	m.HandleFunc("GET "+Prefix+"/signin", c.signinPage)
	m.HandleFunc("POST "+Prefix+"/signin", c.signin)
	m.HandleFunc("GET "+Prefix+"/{$}", c.home)
	m.HandleFunc("GET "+Prefix, c.home)
	m.HandleFunc("POST "+Prefix+"/signout", c.signedIn(c.signout))
	m.HandleFunc("GET "+Prefix+"/sandboxes", c.signedIn(c.sandboxList))
	m.HandleFunc("GET "+Prefix+"/sandboxes/rows", c.signedIn(c.sandboxRows))
	m.HandleFunc("GET "+Prefix+"/sandboxes/{id}", c.signedIn(c.sandboxPage))
	m.HandleFunc("GET "+Prefix+"/sandboxes/{id}/live", c.signedIn(c.sandboxLive))
	m.HandleFunc("GET "+Prefix+"/sandboxes/{id}/confirm/{action}", c.signedIn(c.confirmPage))
	m.HandleFunc("POST "+Prefix+"/sandboxes/{id}/{action}", c.signedIn(c.act))
	m.HandleFunc("GET "+Prefix+"/pools", c.signedIn(c.admin(c.poolsPage)))
	m.HandleFunc("GET "+Prefix+"/pools/live", c.signedIn(c.admin(c.poolsLive)))
	m.HandleFunc("GET "+Prefix+"/trust", c.signedIn(c.admin(c.trustPage)))
	m.HandleFunc("GET "+Prefix+"/reconcile", c.signedIn(c.admin(c.reconcilePage)))
	m.HandleFunc("GET "+Prefix+"/reconcile/confirm", c.signedIn(c.admin(c.reconcileConfirm)))
	m.HandleFunc("POST "+Prefix+"/reconcile", c.signedIn(c.admin(c.reconcileNow)))
	m.HandleFunc(Prefix+"/", c.notFound)
	c.mux = m
}

// ServeHTTP sets the security headers on every answer and serves the page.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	for k, v := range securityHeaders {
		h.Set(k, v)
	}
	if r.Method == http.MethodPost {
		r.Body = http.MaxBytesReader(w, r.Body, maxForm)
	}
	c.mux.ServeHTTP(w, r)
}

// view is what every page's handler knows of the request: who is signed in.
type view struct {
	ses    session
	caller sandboxes.Caller
}

type handler func(w http.ResponseWriter, r *http.Request, v view)

// signedIn serves h to a signed-in browser whose token still authenticates, and
// sends anyone else to the sign-in page. A POST must also carry the session's CSRF
// token and come from this origin.
func (c *Console) signedIn(h handler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ses, ok := c.session(r)
		if !ok {
			c.toSignin(w, r)
			return
		}
		caller, err := c.auth(r.Context(), ses.secret)
		if err != nil {
			if api.IsCode(err, api.CodeUnauthenticated) {
				c.sessions.end(ses.id)
				c.toSignin(w, r)
				return
			}
			c.fail(w, r, nil, err)
			return
		}
		v := view{ses: ses, caller: caller}
		if r.Method == http.MethodPost {
			if !sameOrigin(r) {
				c.errorPage(w, r, &v, http.StatusForbidden, "This request did not come from the console's own pages.")
				return
			}
			if err := r.ParseForm(); err != nil {
				c.errorPage(w, r, &v, http.StatusBadRequest, "The form could not be read.")
				return
			}
			if !ses.validCSRF(r.PostForm.Get(csrfField)) {
				c.errorPage(w, r, &v, http.StatusForbidden, "The form's CSRF token is missing or stale: reload the page and try again.")
				return
			}
		}
		w.Header().Set("Cache-Control", "no-store")
		h(w, r, v)
	}
}

// admin keeps h for admin tokens; a project token gets 403.
func (c *Console) admin(h handler) handler {
	return func(w http.ResponseWriter, r *http.Request, v view) {
		if !v.caller.Admin {
			c.errorPage(w, r, &v, http.StatusForbidden, "This page needs an admin token.")
			return
		}
		h(w, r, v)
	}
}

func (c *Console) session(r *http.Request) (session, bool) {
	ck, err := r.Cookie(cookieName)
	if err != nil {
		return session{}, false
	}
	return c.sessions.get(ck.Value, c.clock.Now())
}

// toSignin answers a request without a live session: a page goes to the sign-in
// page, a fragment or a POST gets 401 (the script then shows that the session
// ended).
func (c *Console) toSignin(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet && !isFragment(r) {
		http.Redirect(w, r, Prefix+"/signin", http.StatusSeeOther)
		return
	}
	c.errorPage(w, r, nil, http.StatusUnauthorized, "Your session has ended: sign in again.")
}

// isFragment is a request of the script for a page's live part.
func isFragment(r *http.Request) bool {
	return strings.HasSuffix(r.URL.Path, "/live") || strings.HasSuffix(r.URL.Path, "/rows")
}

// sameOrigin reports whether a POST comes from a page of this origin: its Origin
// header, or without one its Referer, must name this scheme and host. A request
// with neither is refused, since browsers send Origin with every form POST.
func sameOrigin(r *http.Request) bool {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	want := scheme + "://" + r.Host
	if o := r.Header.Get("Origin"); o != "" {
		return o == want
	}
	ref, err := url.Parse(r.Header.Get("Referer"))
	if err != nil || ref.Host == "" {
		return false
	}
	return ref.Scheme+"://"+ref.Host == want
}

func (c *Console) setCookie(w http.ResponseWriter, r *http.Request, value string, maxAge int) {
	http.SetCookie(w, &http.Cookie{
		Name: cookieName, Value: value, Path: Prefix, MaxAge: maxAge,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil,
	})
}

func (c *Console) home(w http.ResponseWriter, r *http.Request) {
	if _, ok := c.session(r); ok {
		http.Redirect(w, r, Prefix+"/sandboxes", http.StatusSeeOther)
		return
	}
	http.Redirect(w, r, Prefix+"/signin", http.StatusSeeOther)
}

func (c *Console) signinPage(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	c.render(w, r, http.StatusOK, "signin", nil, nil)
}

// signin trades a token, posted in the form body, for a session. A POST from
// another origin is refused, so that no other site can sign a browser in with a
// token of its choosing.
func (c *Console) signin(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	if !sameOrigin(r) {
		c.errorPage(w, r, nil, http.StatusForbidden, "This request did not come from the console's own pages.")
		return
	}
	if err := r.ParseForm(); err != nil {
		c.render(w, r, http.StatusBadRequest, "signin", nil, map[string]any{"Error": "The form could not be read."})
		return
	}
	secret := strings.TrimSpace(r.PostForm.Get("token"))
	if _, err := c.auth(r.Context(), secret); err != nil {
		status, msg := http.StatusUnauthorized, "That token was not accepted."
		if !api.IsCode(err, api.CodeUnauthenticated) {
			status, msg = http.StatusServiceUnavailable, "The token could not be checked now; try again."
			c.log.Warn("console sign-in", "error", err)
		}
		c.render(w, r, status, "signin", nil, map[string]any{"Error": msg})
		return
	}
	// A browser signing in again leaves its old session behind, ended: the new
	// session gets a new ID, so an ID known before sign-in is worth nothing after.
	if old, ok := c.session(r); ok {
		c.sessions.end(old.id)
	}
	ses, err := c.sessions.start(secret, c.clock.Now())
	if err != nil {
		c.fail(w, r, nil, err)
		return
	}
	c.setCookie(w, r, ses.id, 0)
	http.Redirect(w, r, Prefix+"/sandboxes", http.StatusSeeOther)
}

func (c *Console) signout(w http.ResponseWriter, r *http.Request, v view) {
	c.sessions.end(v.ses.id)
	c.setCookie(w, r, "", -1)
	http.Redirect(w, r, Prefix+"/signin", http.StatusSeeOther)
}

func (c *Console) notFound(w http.ResponseWriter, r *http.Request) {
	c.errorPage(w, r, nil, http.StatusNotFound, "There is no such page.")
}

// fail answers a service error: its code's status and message for an *api.Error,
// 500 without details (logged) for anything else, as the API does.
func (c *Console) fail(w http.ResponseWriter, r *http.Request, v *view, err error) {
	if e := api.AsError(err); e != nil {
		c.errorPage(w, r, v, e.HTTPStatus(), e.Message)
		return
	}
	c.log.Error("console", "path", r.URL.Path, "error", err)
	c.errorPage(w, r, v, http.StatusInternalServerError, "Internal error; the daemon's log has the details.")
}

func (c *Console) errorPage(w http.ResponseWriter, r *http.Request, v *view, status int, msg string) {
	w.Header().Set("Cache-Control", "no-store")
	c.render(w, r, status, "error", v, map[string]any{"Status": status, "StatusText": http.StatusText(status), "Message": msg})
}
