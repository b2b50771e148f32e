package client

import (
	"context"
	"time"
)

// Test seams, exported to the external test package only: tests never really sleep.

// WithSleep replaces the waits between retries and polls.
func WithSleep(f func(ctx context.Context, d time.Duration) error) Option {
	return func(o *options) { o.sleep = f }
}

// WithClock replaces the clock that Retry-After dates are read against.
func WithClock(now func() time.Time) Option {
	return func(o *options) { o.now = now }
}

// WithJitter replaces the random fraction of the backoff's jittered half.
func WithJitter(f func() float64) Option {
	return func(o *options) { o.jitter = f }
}

// MaxErrorBody is how much of an error answer the client reads.
const MaxErrorBody = maxErrorBody
