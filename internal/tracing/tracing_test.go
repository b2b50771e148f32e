package tracing

import (
	"context"
	"net/http"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

func TestEnabled(t *testing.T) {
	for _, tt := range []struct {
		name    string
		env     map[string]string
		on, err bool
	}{
		{"nothing set", nil, false, false},
		{"an endpoint", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, true, false},
		{"a traces endpoint", map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"}, true, false},
		{"otlp exporter", map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, true, false},
		{"none", map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://x"}, false, false},
		{"sdk disabled", map[string]string{"OTEL_SDK_DISABLED": "TRUE", "OTEL_TRACES_EXPORTER": "otlp"}, false, false},
		{"another exporter", map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, false, true},
		{"grpc", map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, false, true},
		{"traces protocol wins", map[string]string{"OTEL_TRACES_EXPORTER": "otlp",
			"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, true, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			on, err := Enabled(func(k string) string { return tt.env[k] })
			if on != tt.on || (err != nil) != tt.err {
				t.Fatalf("Enabled = %v, %v; want %v, error %v", on, err, tt.on, tt.err)
			}
		})
	}
}

func TestFromEnvOffIsNil(t *testing.T) {
	tp, stop, err := FromEnv(t.Context(), func(string) string { return "" }, "test")
	if tp != nil || err != nil {
		t.Fatalf("FromEnv with nothing set = %v, %v; want no provider", tp, err)
	}
	if err := stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	if Tracer(nil) != nil {
		t.Fatal("Tracer(nil) is not nil")
	}
}

func TestInjectExtract(t *testing.T) {
	h := http.Header{}
	Inject(context.Background(), h)
	if len(h) != 0 {
		t.Fatalf("Inject without a span wrote %v", h)
	}
	tp := sdktrace.NewTracerProvider()
	ctx, span := Tracer(tp).Start(context.Background(), "x")
	defer span.End()
	Inject(ctx, h)
	if h.Get("traceparent") == "" {
		t.Fatal("no traceparent injected")
	}
	got := Extract(context.Background(), h)
	_, child := Tracer(tp).Start(got, "y")
	defer child.End()
	if child.SpanContext().TraceID() != span.SpanContext().TraceID() {
		t.Fatal("the extracted context does not continue the trace")
	}
}
