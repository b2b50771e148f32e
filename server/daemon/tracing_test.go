package daemon_test

import (
	"context"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/different-ai/differently/adapters/adapterhttp"
	"github.com/different-ai/differently/adapters/fake"
	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/internal/pgtest"
	"github.com/different-ai/differently/internal/tracing"
	"github.com/different-ai/differently/server/config"
	"github.com/different-ai/differently/server/daemon"
)

// spans keeps the spans a tracer provider ends and tells a waiter of each.
type spans struct {
	mu      sync.Mutex
	ended   []sdktrace.ReadOnlySpan
	changed chan struct{}
}

func newSpans() *spans { return &spans{changed: make(chan struct{}, 1)} }

func (s *spans) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (s *spans) OnEnd(sp sdktrace.ReadOnlySpan) {
	s.mu.Lock()
	s.ended = append(s.ended, sp)
	s.mu.Unlock()
	select {
	case s.changed <- struct{}{}:
	default:
	}
}
func (s *spans) Shutdown(context.Context) error   { return nil }
func (s *spans) ForceFlush(context.Context) error { return nil }

// named returns the ended spans of that name.
func (s *spans) named(name string) []sdktrace.ReadOnlySpan {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []sdktrace.ReadOnlySpan
	for _, sp := range s.ended {
		if sp.Name() == name {
			out = append(out, sp)
		}
	}
	return out
}

// wait returns the first ended span of that name for which ok holds, waiting for
// spans to end as long as the deadline allows.
func (s *spans) wait(t *testing.T, name string, ok func(sdktrace.ReadOnlySpan) bool) sdktrace.ReadOnlySpan {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		for _, sp := range s.named(name) {
			if ok(sp) {
				return sp
			}
		}
		select {
		case <-s.changed:
		case <-deadline:
			t.Fatalf("no span %q ended in time", name)
		}
	}
}

func attr(sp sdktrace.ReadOnlySpan, key string) string {
	for _, kv := range sp.Attributes() {
		if string(kv.Key) == key {
			return kv.Value.Emit()
		}
	}
	return ""
}

// tracedRemotePool starts a daemon and a plugin, each with its own recording tracer
// provider, and a remote pool named pool on the plugin.
func tracedRemotePool(t *testing.T, pool string, a *fake.Adapter) (*replica, *spans, *spans) {
	daemonSpans, pluginSpans := newSpans(), newSpans()
	daemonTP := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(daemonSpans))
	pluginTP := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(pluginSpans))
	srv := httptest.NewServer(adapterhttp.Handler(a, "", adapterhttp.WithTracerProvider(pluginTP)))
	t.Cleanup(srv.Close)
	cfg := config.Default()
	cfg.Database.URL = pgtest.SchemaURL(t)
	r := startConfig(t, t.TempDir(), cfg, func(o *daemon.Options) { o.TracerProvider = daemonTP })
	r.call("POST", "/v1/admin/pools", map[string]any{
		"name": pool, "adapter": "remote", "trust": "private",
		"config": map[string]any{"endpoint": srv.URL},
	}, 201, nil)
	return r, daemonSpans, pluginSpans
}

// One create on a remote pool is one trace, from the API request through placement,
// admission, the scheduler's attempt and the adapter call, into the plugin, whose
// span is the child of the daemon's adapter call. No span carries the token.
func TestCreateOnARemotePoolIsOneTrace(t *testing.T) {
	r, daemonSpans, pluginSpans := tracedRemotePool(t, "remote1", fake.New(fake.Config{}))
	var sb sandbox
	r.call("POST", "/v1/sandboxes", map[string]any{"placement": map[string]any{"allowedPools": []string{"remote1"}}}, 202, &sb)
	r.waitState(sb.ID, "running")

	ofSandbox := func(sp sdktrace.ReadOnlySpan) bool { return attr(sp, string(tracing.SandboxID)) == sb.ID }
	request := daemonSpans.wait(t, "POST /v1/sandboxes", func(sdktrace.ReadOnlySpan) bool { return true })
	placement := daemonSpans.wait(t, "sandbox.placement", ofSandbox)
	admission := daemonSpans.wait(t, "sandbox.admission", ofSandbox)
	attempt := daemonSpans.wait(t, "scheduler.attempt", ofSandbox)
	call := daemonSpans.wait(t, "adapter.Create", ofSandbox)
	plugin := pluginSpans.wait(t, "adapter POST /instances", ofSandbox)

	traceID := request.SpanContext().TraceID()
	if request.SpanKind() != trace.SpanKindServer || attr(request, "http.route") != "/v1/sandboxes" ||
		attr(request, "http.response.status_code") != "202" {
		t.Errorf("request span: kind %v, route %q, status %q", request.SpanKind(), attr(request, "http.route"),
			attr(request, "http.response.status_code"))
	}
	for _, c := range []struct {
		name         string
		span, parent sdktrace.ReadOnlySpan
	}{
		{"placement", placement, request},
		{"admission", admission, request},
		{"attempt", attempt, request},
		{"adapter call", call, attempt},
	} {
		if c.span.SpanContext().TraceID() != traceID || c.span.Parent().SpanID() != c.parent.SpanContext().SpanID() {
			t.Errorf("%s span: trace %s parent %s, want trace %s parent %s (%s)", c.name,
				c.span.SpanContext().TraceID(), c.span.Parent().SpanID(), traceID, c.parent.SpanContext().SpanID(), c.parent.Name())
		}
	}
	if plugin.SpanContext().TraceID() != traceID || plugin.Parent().SpanID() != call.SpanContext().SpanID() || !plugin.Parent().IsRemote() {
		t.Errorf("plugin span: trace %s parent %s (remote %v), want trace %s, the daemon's adapter call %s as remote parent",
			plugin.SpanContext().TraceID(), plugin.Parent().SpanID(), plugin.Parent().IsRemote(), traceID, call.SpanContext().SpanID())
	}
	for key, want := range map[string]string{
		string(tracing.Pool): "remote1", string(tracing.Adapter): "remote", string(tracing.Attempt): "1",
		string(tracing.Outcome): "running",
	} {
		if got := attr(attempt, key); got != want {
			t.Errorf("attempt span: %s = %q, want %q", key, got, want)
		}
	}
	for _, sp := range allSpans(daemonSpans, pluginSpans) {
		for _, kv := range sp.Attributes() {
			if strings.Contains(kv.Value.Emit(), r.token) {
				t.Errorf("span %s attribute %s carries the admin token", sp.Name(), kv.Key)
			}
		}
	}
}

func allSpans(ss ...*spans) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range ss {
		s.mu.Lock()
		out = append(out, s.ended...)
		s.mu.Unlock()
	}
	return out
}

// A Create the backend refuses shows its code on the daemon's adapter call and on the
// plugin's span, and the attempt says the sandbox went back to the queue.
func TestFailedAttemptIsTracedWithItsCode(t *testing.T) {
	r, daemonSpans, pluginSpans := tracedRemotePool(t, "remote2",
		fake.New(fake.Config{CreateErrors: []api.Code{api.CodeSandboxFailed}}))
	var sb sandbox
	r.call("POST", "/v1/sandboxes", map[string]any{"placement": map[string]any{"allowedPools": []string{"remote2"}}}, 202, &sb)
	r.waitState(sb.ID, "running")

	first := func(sp sdktrace.ReadOnlySpan) bool {
		return attr(sp, string(tracing.SandboxID)) == sb.ID && attr(sp, string(tracing.Attempt)) == "1"
	}
	attempt := daemonSpans.wait(t, "scheduler.attempt", first)
	if got := attr(attempt, string(tracing.Outcome)); got != "requeued" {
		t.Errorf("first attempt's outcome %q, want requeued", got)
	}
	call := daemonSpans.wait(t, "adapter.Create", func(sp sdktrace.ReadOnlySpan) bool {
		return attr(sp, string(tracing.SandboxID)) == sb.ID && sp.Parent().SpanID() == attempt.SpanContext().SpanID()
	})
	plugin := pluginSpans.wait(t, "adapter POST /instances", func(sp sdktrace.ReadOnlySpan) bool {
		return sp.Parent().SpanID() == call.SpanContext().SpanID()
	})
	for _, sp := range []sdktrace.ReadOnlySpan{call, plugin} {
		if got := attr(sp, string(tracing.ErrorCode)); got != string(api.CodeSandboxFailed) {
			t.Errorf("%s span: error code %q, want sandbox_failed", sp.Name(), got)
		}
	}
	second := daemonSpans.wait(t, "scheduler.attempt", func(sp sdktrace.ReadOnlySpan) bool {
		return attr(sp, string(tracing.SandboxID)) == sb.ID && attr(sp, string(tracing.Attempt)) == "2"
	})
	if got := attr(second, string(tracing.Outcome)); got != "running" {
		t.Errorf("second attempt's outcome %q, want running", got)
	}
}
