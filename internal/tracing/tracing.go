// Package tracing sets OpenTelemetry tracing up from the standard OTEL_* environment
// variables, and holds what the daemon and the adapter protocol share: how a trace's
// context travels in HTTP headers (W3C traceparent) and the names of the attributes
// spans carry.
//
// Tracing is off unless the environment asks for it; when off, the daemon is given no
// tracer at all and its code paths skip span work entirely, so that it costs nothing.
// Spans never carry a secret: no header, no query string, no environment variable,
// no label value, no file content; only IDs, names, counts and error codes.
package tracing

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// Scope is the instrumentation scope of every span this repository makes.
const Scope = "github.com/different-ai/differently"

// Attribute keys of the spans.
const (
	SandboxID = attribute.Key("differently.sandbox.id")
	Pool      = attribute.Key("differently.pool")
	Adapter   = attribute.Key("differently.adapter")
	Attempt   = attribute.Key("differently.attempt")
	ErrorCode = attribute.Key("differently.error.code")
	// Outcome is what a provisioning attempt led to (running, requeued, retry, failed).
	Outcome = attribute.Key("differently.outcome")
)

// propagator carries a trace's context in the traceparent and tracestate headers.
// It holds no state, so one value serves everyone.
var propagator = propagation.TraceContext{}

// Inject writes the trace context of ctx's span into h, when ctx has one.
func Inject(ctx context.Context, h http.Header) {
	if trace.SpanContextFromContext(ctx).IsValid() {
		propagator.Inject(ctx, propagation.HeaderCarrier(h))
	}
}

// Extract returns ctx with the remote span context h carries, if any.
func Extract(ctx context.Context, h http.Header) context.Context {
	if h.Get("traceparent") == "" {
		return ctx
	}
	return propagator.Extract(ctx, propagation.HeaderCarrier(h))
}

// Enabled reports whether the environment asks for traces: OTEL_TRACES_EXPORTER is
// otlp, or it is unset and an OTLP endpoint is given. OTEL_SDK_DISABLED=true and
// OTEL_TRACES_EXPORTER=none turn them off. Any other exporter is an error, as is an
// OTLP protocol other than http/protobuf, the one this build carries.
func Enabled(getenv func(string) string) (bool, error) {
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return false, nil
	}
	on := false
	switch exp := strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")); exp {
	case "none":
		return false, nil
	case "otlp":
		on = true
	case "":
		on = getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
	default:
		return false, fmt.Errorf("OTEL_TRACES_EXPORTER=%q: only otlp (or none) is supported", exp)
	}
	if !on {
		return false, nil
	}
	for _, name := range []string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		if p := strings.TrimSpace(getenv(name)); p != "" {
			if p != "http/protobuf" {
				return false, fmt.Errorf("%s=%q: only http/protobuf is supported", name, p)
			}
			break
		}
	}
	return true, nil
}

// FromEnv returns a tracer provider that exports spans over OTLP/HTTP when the
// environment asks for it (Enabled), and nil otherwise, with the function that
// flushes and stops it (a no-op when nil). service is the default service.name;
// OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES override it. The exporter reads the
// OTEL_EXPORTER_OTLP_* variables (endpoint, headers, timeout, TLS) from the process
// environment itself.
func FromEnv(ctx context.Context, getenv func(string) string, service string) (trace.TracerProvider, func(context.Context) error, error) {
	noop := func(context.Context) error { return nil }
	on, err := Enabled(getenv)
	if err != nil || !on {
		return nil, noop, err
	}
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, noop, fmt.Errorf("OTLP trace exporter: %w", err)
	}
	res, err := resource.Merge(
		resource.NewSchemaless(attribute.String("service.name", service)),
		envResource(getenv),
	)
	if err != nil {
		return nil, noop, fmt.Errorf("trace resource: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	return tp, tp.Shutdown, nil
}

// envResource reads OTEL_RESOURCE_ATTRIBUTES (k=v pairs, comma-separated) and
// OTEL_SERVICE_NAME, which wins over a service.name among them.
func envResource(getenv func(string) string) *resource.Resource {
	var attrs []attribute.KeyValue
	for kv := range strings.SplitSeq(getenv("OTEL_RESOURCE_ATTRIBUTES"), ",") {
		k, v, ok := strings.Cut(kv, "=")
		if k = strings.TrimSpace(k); ok && k != "" {
			attrs = append(attrs, attribute.String(k, strings.TrimSpace(v)))
		}
	}
	if s := strings.TrimSpace(getenv("OTEL_SERVICE_NAME")); s != "" {
		attrs = append(attrs, attribute.String("service.name", s))
	}
	return resource.NewSchemaless(attrs...)
}

// Tracer is tp's tracer for this repository's spans, or nil for a nil tp: code
// given a nil tracer makes no spans.
func Tracer(tp trace.TracerProvider) trace.Tracer {
	if tp == nil {
		return nil
	}
	return tp.Tracer(Scope)
}
