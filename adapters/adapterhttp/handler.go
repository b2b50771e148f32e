package adapterhttp

import (
	"github.com/different-ai/differently/internal/tracing"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/netip"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/internal/ndjson"
)

const (
	// BasePath prefixes every route of the protocol.
	BasePath = "/adapter/v1"
	// ProtocolHeader carries adapters.ProtocolVersion on every response.
	ProtocolHeader = "Differently-Adapter-Protocol"

	// TimeoutHeader carries, in milliseconds, how long the caller will wait for the
	// answer; the handler bounds the adapter's context by it.
	TimeoutHeader = "Differently-Timeout-Ms"
	// maxTimeoutMs bounds what TimeoutHeader can ask for (a day).
	maxTimeoutMs = 24 * 60 * 60 * 1000

	// NoRouteDetail marks a not_found that says the path is no route of the
	// protocol, not that an instance or a snapshot is missing.
	NoRouteDetail = "noRoute"

	contentTypeJSON   = "application/json"
	contentTypeNDJSON = ndjson.ContentType
	contentTypeBytes  = "application/octet-stream"
)

// HandlerOption configures a Handler.
type HandlerOption func(*handler)

// WithTracerProvider makes a span of every request the handler serves, continuing
// the caller's trace when the request carries a traceparent.
func WithTracerProvider(tp trace.TracerProvider) HandlerOption {
	return func(h *handler) { h.tracer = tracing.Tracer(tp) }
}

// Handler serves a over the adapter protocol under BasePath. With a non-empty token,
// every request must carry Authorization: Bearer <token>.
func Handler(a adapters.ExecutionAdapter, token string, opts ...HandlerOption) http.Handler {
	h := &handler{a: a, token: token, redact: adapters.NewRedactor(token)}
	for _, o := range opts {
		o(h)
	}
	if token != "" {
		sum := sha256.Sum256([]byte(token))
		h.tokenSum = sum[:]
	}
	mux := http.NewServeMux()
	route := func(pattern string, fn func(http.ResponseWriter, *http.Request) error) {
		method, path, _ := strings.Cut(pattern, " ")
		mux.HandleFunc(method+" "+BasePath+path, func(w http.ResponseWriter, r *http.Request) {
			if h.tracer != nil {
				ctx, span := h.tracer.Start(tracing.Extract(r.Context(), r.Header), "adapter "+pattern,
					trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attribute.String("http.route", BasePath+path)))
				defer span.End()
				r = r.WithContext(ctx)
			}
			if err := fn(w, r); err != nil {
				if span := trace.SpanFromContext(r.Context()); span.IsRecording() {
					span.SetAttributes(tracing.ErrorCode.String(string(api.CodeOf(err))))
					span.SetStatus(codes.Error, string(api.CodeOf(err)))
				}
				h.writeError(w, err)
			}
		})
	}
	route("GET /info", h.info)
	route("GET /capacity", h.capacity)
	route("GET /health", h.health)
	route("POST /instances", h.create)
	route("GET /instances", h.list)
	route("GET /instances/{ref}", h.get)
	route("DELETE /instances/{ref}", h.delete)
	route("POST /instances/{ref}/exec", h.exec)
	route("GET /instances/{ref}/files", h.listFiles)
	route("GET /instances/{ref}/files/content", h.readFile)
	route("PUT /instances/{ref}/files/content", h.writeFile)
	route("POST /instances/{ref}/{action}", h.action)
	route("POST /instances/{ref}/snapshots", h.snapshot)
	route("DELETE /snapshots/{ref}", h.deleteSnapshot)
	route("POST /instances/{ref}/ports", h.exposePort)
	route("POST /instances/{ref}/ttl", h.renewTTL)
	// The mux's own 404 and 405 answers are plain text; a catch-all keeps every answer
	// in the error envelope, which is all a client can interpret.
	mux.HandleFunc("/", h.unrouted)
	h.mux = mux
	return h
}

type handler struct {
	a        adapters.ExecutionAdapter
	token    string
	tokenSum []byte
	redact   *adapters.Redactor
	mux      *http.ServeMux
	tracer   trace.Tracer
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set(ProtocolHeader, adapters.ProtocolVersion)
	defer func() {
		if p := recover(); p != nil {
			if p == http.ErrAbortHandler {
				panic(p)
			}
			// One broken adapter call must not take down every sandbox the plugin serves.
			log.Printf("adapterhttp: panic serving %s %s: %v\n%s", r.Method, r.URL.Path, p, debug.Stack())
			h.writeError(w, errPanic)
		}
	}()
	if err := h.fromBrowser(r); err != nil {
		h.writeError(w, err)
		return
	}
	if !h.authorized(r) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="differently-adapter"`)
		h.writeError(w, api.Errorf(api.CodeUnauthenticated, "missing or wrong bearer token"))
		return
	}
	// The caller's deadline, so that the adapter meets it as a deadline (and says
	// what it means, sandbox_failed for a sandbox still starting) instead of seeing
	// its request cancelled. A malformed value is ignored: the request still ends
	// when the caller hangs up.
	if ms, err := strconv.ParseInt(r.Header.Get(TimeoutHeader), 10, 64); err == nil && ms > 0 {
		ctx, cancel := context.WithTimeout(r.Context(), time.Duration(min(ms, maxTimeoutMs))*time.Millisecond)
		defer cancel()
		r = r.WithContext(ctx)
	}
	h.mux.ServeHTTP(w, r)
}

var errPanic = api.Errorf(api.CodeInternal, "internal error: the adapter panicked")

// authorized compares hashes rather than the tokens themselves so that neither the
// comparison's duration nor its early exit on a length mismatch reveals the token's
// length.
func (h *handler) authorized(r *http.Request) bool {
	if h.tokenSum == nil {
		return true
	}
	scheme, presented, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return false
	}
	sum := sha256.Sum256([]byte(strings.TrimSpace(presented)))
	return subtle.ConstantTimeCompare(sum[:], h.tokenSum) == 1
}

// fromBrowser refuses what a web browser sends on a page's behalf. Only a control
// plane calls an adapter, and it never sends Origin or Sec-Fetch-Site; a browser
// sends one of them with every request a page makes. Without this, a page the
// operator merely visits could post text/plain "simple" requests, which no CORS
// preflight stops, to a plugin served without a token on loopback, and run commands
// on the host. Without a token the Host must also name a loopback address, so that
// a page whose name the attacker points at 127.0.0.1 (DNS rebinding) cannot read
// the answers either.
func (h *handler) fromBrowser(r *http.Request) error {
	if r.Header.Get("Origin") != "" || r.Header.Get("Sec-Fetch-Site") != "" {
		return api.Errorf(api.CodeForbidden, "the adapter protocol is not for browsers: requests with Origin or Sec-Fetch-Site are refused")
	}
	if h.tokenSum == nil && !IsLoopbackHost(r.Host) {
		return api.Errorf(api.CodeForbidden, "without a token the adapter answers only requests addressed to a loopback host, not %q", r.Host)
	}
	return nil
}

// IsLoopbackHost reports whether host, with or without a port (a Host header, a
// listen address), names this machine by a loopback address or as localhost. An
// empty host, which a listener takes for every interface, does not.
func IsLoopbackHost(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// probeMethods are the methods the protocol uses, tried to tell a wrong method (405)
// from an unknown path (404).
var probeMethods = []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodDelete}

func (h *handler) unrouted(w http.ResponseWriter, r *http.Request) {
	var allowed []string
	for _, m := range probeMethods {
		probe := r.Clone(r.Context())
		probe.Method = m
		if _, pattern := h.mux.Handler(probe); pattern != "" && pattern != "/" {
			allowed = append(allowed, m)
		}
	}
	if len(allowed) == 0 {
		// Marked, so that a client can tell a path that is not the protocol's (an
		// endpoint configured with the wrong base path) from an instance that is gone.
		h.writeError(w, adapters.NotFound("no route for %s %s", r.Method, r.URL.Path).WithDetail(NoRouteDetail, true))
		return
	}
	if slices.Contains(allowed, http.MethodGet) {
		allowed = append(allowed, http.MethodHead)
	}
	w.Header().Set("Allow", strings.Join(allowed, ", "))
	// No code maps to 405; invalid_request is what a client should make of it.
	writeJSON(w, http.StatusMethodNotAllowed, api.ErrorEnvelope{Error: adapters.InvalidRequest(
		"method %s is not allowed on %s (allowed: %s)", r.Method, r.URL.Path, strings.Join(allowed, ", "))})
}

// writeError answers with the error envelope. Errors that are not *api.Error carry no
// code the control plane could act on, so they become internal.
func (h *handler) writeError(w http.ResponseWriter, err error) {
	e := api.AsError(err)
	if e == nil {
		e = api.Errorf(api.CodeInternal, "adapter error: %v", err)
	}
	e = h.scrub(e)
	writeJSON(w, e.HTTPStatus(), api.ErrorEnvelope{Error: e})
}

// scrub keeps the token out of anything the server says, in case an adapter error
// quotes a request or a configuration that contains it.
func (h *handler) scrub(e *api.Error) *api.Error { return h.redact.Error(e) }

func (h *handler) scrubString(s string) string { return h.redact.String(s) }

// writeJSON marshals before writing so that a value that cannot be encoded still gets
// a well-formed error answer instead of half a body.
func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		body, _ = json.Marshal(api.ErrorEnvelope{Error: api.Errorf(api.CodeInternal, "encoding the answer failed")})
	}
	w.Header().Set("Content-Type", contentTypeJSON)
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(append(body, '\n'))
}

// decodeJSON reads one JSON value from the body, strictly: a peer that sends fields
// this version does not know is speaking a different contract, and silently dropping
// them would hide it.
func decodeJSON(w http.ResponseWriter, r *http.Request, v any) error {
	if r.ContentLength > api.MaxJSONBodyBytes {
		return jsonTooLarge()
	}
	body := http.MaxBytesReader(w, r.Body, api.MaxJSONBodyBytes)
	dec := json.NewDecoder(body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return bodyError(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		if err == nil {
			return adapters.InvalidRequest("request body holds more than one JSON value")
		}
		return bodyError(err)
	}
	return nil
}

func bodyError(err error) error {
	if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
		return jsonTooLarge()
	}
	if errors.Is(err, io.EOF) {
		return adapters.InvalidRequest("request body is empty")
	}
	return adapters.InvalidRequest("malformed JSON body: %v", err)
}

func jsonTooLarge() error {
	return adapters.TooLarge("request body is over %d bytes", api.MaxJSONBodyBytes)
}

// require checks at call time that the adapter can serve an optional operation: it
// must implement the interface and declare one of the features. Capabilities are
// fetched once per request, as the pool manager would see them.
func (h *handler) require(r *http.Request, implemented bool, op string, features ...string) error {
	if !implemented {
		return adapters.Unsupported(op)
	}
	caps, err := h.a.Capabilities(r.Context())
	if err != nil {
		return err
	}
	effective := adapters.EffectiveFeatures(h.a, caps.Features)
	for _, f := range features {
		if slices.Contains(effective, f) {
			return nil
		}
	}
	return adapters.Unsupported(op)
}

func queryPath(r *http.Request) (string, error) {
	p := r.URL.Query().Get("path")
	if p == "" {
		return "", adapters.InvalidRequest("the path query parameter is required")
	}
	return p, nil
}
