package httpapi

import (
	"context"

	"github.com/different-ai/differently/internal/tracing"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"errors"
	"fmt"
	"io"
	"net/http"
	"runtime/debug"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/server/apierr"
)

type httpMetrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

func newHTTPMetrics(reg prometheus.Registerer) (*httpMetrics, error) {
	m := &httpMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "differently_http_requests_total",
			Help: "HTTP requests answered, by method, route pattern and status.",
		}, []string{"method", "route", "status"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "differently_http_request_duration_seconds",
			Help:    "Time to answer HTTP requests, by method and route pattern (streamed execs included).",
			Buckets: prometheus.DefBuckets,
		}, []string{"method", "route"}),
	}
	for _, c := range []prometheus.Collector{m.requests, m.duration} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("httpapi: register metrics: %w", err)
		}
	}
	return m, nil
}

// statusWriter records the status for metrics and lets the recoverer know whether an
// answer has started. Unwrap keeps http.ResponseController (Flush for streamed execs)
// working through it.
//
// It also keeps an answer from waiting for a body nobody will read: when the answer
// starts before the request's body has been read to its end (a 401, a 413 on the
// declared length, /healthz with a body, a body cut off half-way), the answer says
// Connection: close and the body's read deadline is moved to now. Otherwise net/http
// would first read the rest of the body, to reuse the connection, and a client that
// declared a body and never sends it would get no answer and hold the connection.
type statusWriter struct {
	http.ResponseWriter
	status int
	// body is the request's body when it has one; nil otherwise.
	body *trackedBody
	// h2 is set for a request over HTTP/2, whose connection carries other
	// requests' streams: see closeAfterAnswer.
	h2 bool
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
		w.beforeAnswer()
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
		w.beforeAnswer()
	}
	return w.ResponseWriter.Write(b)
}

// Flush sends what is buffered, starting a 200 answer when none has started. The
// Connect handlers of the E2B front door need the writer to be an http.Flusher
// itself; ResponseController alone would find it through Unwrap.
func (w *statusWriter) Flush() {
	if w.status == 0 {
		w.status = http.StatusOK
		w.beforeAnswer()
	}
	_ = http.NewResponseController(w.ResponseWriter).Flush()
}

func (w *statusWriter) beforeAnswer() {
	w.dropUnreadBody()
	if w.h2 {
		// Whoever asked to close the connection (internal/body, for one) meant
		// this request's: over HTTP/2 its stream ends on its own, and the header
		// would end the others' too.
		w.Header().Del("Connection")
	}
}

func (w *statusWriter) dropUnreadBody() {
	if w.body == nil || w.body.done() {
		return
	}
	// Connection: close makes net/http skip reading the rest before the answer; the
	// past deadline ends the read it does after the answer, so the connection closes
	// at once instead of when the body deadline passes. Over HTTP/2 the server
	// resets the stream of an unread body by itself, and beforeAnswer drops the
	// header.
	w.Header().Set("Connection", "close")
	_ = http.NewResponseController(w.ResponseWriter).SetReadDeadline(time.Now())
}

// closeAfterAnswer makes the answer to r the last on its connection. Over HTTP/2
// the statusWriter every request goes through (instrument) drops the header again
// before the answer: a connection there carries other requests' streams, and Go's
// server reads Connection: close as a GOAWAY for all of them, whereas the one
// request's unread body ends with its own stream.
func closeAfterAnswer(w http.ResponseWriter) {
	w.Header().Set("Connection", "close")
}

// trackedBody is a request body that knows whether it was read to its end.
type trackedBody struct {
	io.ReadCloser
	eof atomic.Bool
}

func (b *trackedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if errors.Is(err, io.EOF) {
		b.eof.Store(true)
	}
	return n, err
}

func (b *trackedBody) done() bool { return b.eof.Load() }

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// instrument counts requests by route pattern rather than path, so sandbox IDs do not
// explode the metric's cardinality.
func (s *Server) instrument(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w, h2: r.ProtoMajor >= 2}
		if r.Body != nil && r.Body != http.NoBody && r.ContentLength != 0 {
			// Every body must arrive within the body deadline, and that bound holds
			// from the first byte, before authentication: a caller without a token
			// must not hold a connection longer than one with. A file upload, once
			// authenticated, moves it to its own longer deadline. The deadline ends
			// with the body: net/http clears it when it starts reading the connection
			// in the background at the body's end, to notice a client hanging up, so
			// a long streamed exec is not cut (TestBodyDeadlineEndsWithTheBody).
			_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(s.bodyTimeout))
			sw.body = &trackedBody{ReadCloser: r.Body}
			r.Body = sw.body
		}
		var span trace.Span
		if s.tracer != nil {
			var ctx context.Context
			ctx, span = s.tracer.Start(tracing.Extract(r.Context(), r.Header), "HTTP "+metricMethod(r.Method),
				trace.WithSpanKind(trace.SpanKindServer))
			r = r.WithContext(ctx)
		}
		defer func() {
			route := "unmatched"
			if rc := chi.RouteContext(r.Context()); rc != nil && rc.RoutePattern() != "" {
				route = rc.RoutePattern()
			} else if p := s.router.Find(chi.NewRouteContext(), r.Method, r.URL.Path); p != "" {
				// Refused before routing (401, 403, 413): still count it by route.
				route = p
			} else if d := s.doorOf(r.URL.Path); d != "" {
				// A front door routes by itself; its prefix keeps the label set small.
				route = d + "/*"
			}
			status := sw.status
			if status == 0 {
				status = http.StatusOK
			}
			method := metricMethod(r.Method)
			took := time.Since(start)
			if span != nil {
				// The route pattern, never the path: paths carry sandbox IDs and file
				// names, and the query may carry more.
				span.SetName(method + " " + route)
				span.SetAttributes(attribute.String("http.request.method", method),
					attribute.String("http.route", route), attribute.Int("http.response.status_code", status))
				if status >= 500 {
					span.SetStatus(codes.Error, http.StatusText(status))
				}
				span.End()
			}
			s.metrics.requests.WithLabelValues(method, route, strconv.Itoa(status)).Inc()
			s.metrics.duration.WithLabelValues(method, route).Observe(took.Seconds())
			if s.accessLog {
				// The path without its query, which may carry file paths; never a
				// header but the caller's own User-Agent.
				s.log.Info("request", "method", method, "path", r.URL.Path, "route", route, "status", status,
					"duration", took.Round(time.Microsecond), "remote", r.RemoteAddr, "userAgent", r.UserAgent())
			}
		}()
		next.ServeHTTP(sw, r)
	})
}

// metricMethod is a request's method as a metric label: a method HTTP does not
// define is "other". Any caller, before authentication, chooses the method, and a
// label taken from it as it is would let them add series without end.
func metricMethod(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodConnect, http.MethodOptions, http.MethodTrace:
		return m
	}
	return "other"
}

// recoverer turns a panic into 500 internal and keeps the daemon serving. Once an
// answer has started (a streamed exec), a status can no longer be sent: the
// connection is aborted instead, which the client sees as a broken stream.
func (s *Server) recoverer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			p := recover()
			if p == nil {
				return
			}
			if p == http.ErrAbortHandler {
				panic(p)
			}
			s.log.Error("panic serving request", "method", r.Method, "path", r.URL.Path,
				"panic", p, "stack", string(debug.Stack()))
			if sw, ok := w.(*statusWriter); ok && sw.status != 0 {
				panic(http.ErrAbortHandler)
			}
			writeJSON(w, http.StatusInternalServerError,
				api.ErrorEnvelope{Error: api.Errorf(api.CodeInternal, "internal error")})
		}()
		next.ServeHTTP(w, r)
	})
}

// checkSize refuses a request target over MaxURLBytes (414) and header fields over
// MaxHeaderFieldBytes (431) with the error envelope. net/http refuses only past
// MaxHeaderBytes, and then answers itself in plain text before any handler runs;
// the lower bounds here give every size a client can reasonably send a JSON
// answer, and keep what reaches authentication and the log small.
func (s *Server) checkSize(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if len(r.RequestURI) > MaxURLBytes {
			closeAfterAnswer(w)
			writeJSON(w, http.StatusRequestURITooLong, api.ErrorEnvelope{
				Error: apierr.Invalid("the request target is %d bytes, over the limit of %d", len(r.RequestURI), MaxURLBytes)})
			return
		}
		n := 0
		for k, vs := range r.Header {
			for _, v := range vs {
				n += len(k) + len(v) + 4 // ": " and CRLF
			}
		}
		if n > MaxHeaderFieldBytes {
			closeAfterAnswer(w)
			writeJSON(w, http.StatusRequestHeaderFieldsTooLarge, api.ErrorEnvelope{
				Error: apierr.Invalid("the request's header fields are %d bytes, over the limit of %d", n, MaxHeaderFieldBytes)})
			return
		}
		next.ServeHTTP(w, r)
	})
}

// limitBody caps request bodies: file content at api.MaxFileBytes, everything else
// (JSON) at api.MaxJSONBodyBytes. A declared length over the cap is refused before
// anything is read; a chunked body fails when the reader crosses it.
func (s *Server) limitBody(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		limit, what := int64(api.MaxJSONBodyBytes), "request body"
		if r.Method == http.MethodPut && strings.HasPrefix(r.URL.Path, "/v1/sandboxes/") &&
			strings.HasSuffix(r.URL.Path, "/files/content") {
			limit, what = api.MaxFileBytes, "file content"
		}
		if r.ContentLength > limit {
			s.writeError(w, r, api.Errorf(api.CodePayloadTooLarge, "%s is over %d bytes", what, limit))
			return
		}
		if r.Body != nil {
			r.Body = http.MaxBytesReader(w, r.Body, limit)
		}
		next.ServeHTTP(w, r)
	})
}

// DefaultBodyReadTimeout is how long a request body may take to arrive: a JSON body
// (at most 4 MiB) in all, a file upload until it is authenticated.
const DefaultBodyReadTimeout = time.Minute
