package sandboxes

import (
	"context"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/internal/tracing"
)

// span starts a span of one step of an operation on a sandbox, and returns the
// function that ends it with the step's error. Without a tracer it does nothing.
func (s *Service) span(ctx context.Context, name, sandboxID string) (context.Context, func(error)) {
	if s.tracer == nil {
		return ctx, func(error) {}
	}
	ctx, span := s.tracer.Start(ctx, name, trace.WithAttributes(tracing.SandboxID.String(sandboxID)))
	return ctx, func(err error) {
		if err != nil {
			// The code only: messages may quote what the caller sent.
			code := api.CodeOf(err)
			span.SetAttributes(tracing.ErrorCode.String(string(code)))
			span.SetStatus(codes.Error, string(code))
		}
		span.End()
	}
}
