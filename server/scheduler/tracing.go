package scheduler

import (
	"context"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/internal/tracing"
	"github.com/different-ai/differently/server/store"
)

// attemptSpan starts the span of one provisioning attempt: a child of j.parent
// when the API handed the create over, a trace of its own otherwise (a pass claimed
// it from the queue, where no request's context survives).
func (s *Scheduler) attemptSpan(ctx context.Context, j job) (context.Context, trace.Span) {
	if j.parent.IsValid() {
		ctx = trace.ContextWithSpanContext(ctx, j.parent)
	}
	return s.opts.Tracer.Start(ctx, "scheduler.attempt", trace.WithAttributes(
		tracing.SandboxID.String(j.sb.ID), tracing.Pool.String(j.view.Pool.Name),
		tracing.Adapter.String(j.view.Pool.Adapter), tracing.Attempt.Int(j.sb.Attempts+1)))
}

// endAttempt records what the attempt led to and ends its span.
func endAttempt(span trace.Span, o outcome, row store.Sandbox) {
	span.SetAttributes(tracing.Outcome.String(o.String()))
	if row.State == store.StateFailed || o == outError {
		span.SetStatus(codes.Error, string(row.State))
	}
	span.End()
}

// endWithError records err's code, never its message (a backend's message may quote
// what it was sent), and ends the span.
func endWithError(span trace.Span, err error) {
	if err != nil {
		code := api.CodeOf(err)
		if !code.Known() {
			code = api.CodeInternal
		}
		span.SetAttributes(tracing.ErrorCode.String(string(code)))
		span.SetStatus(codes.Error, string(code))
	}
	span.End()
}

// String names the outcome for a span's attribute.
func (o outcome) String() string {
	switch o {
	case outStarted:
		return "running"
	case outFailed:
		return "failed"
	case outRequeued:
		return "requeued"
	case outError:
		return "error"
	}
	return "none"
}
