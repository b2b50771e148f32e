package httpapi

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http/httptest"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/server/store"
)

// A broken pipe or a reset is the client hanging up only when the request's
// context says the client is gone: under a live context it came from the
// database's connection or a backend's, and that failure is logged at Error.
func TestClientGoneNeedsTheClientGone(t *testing.T) {
	reset := &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}
	pipe := &net.OpError{Op: "write", Net: "tcp", Err: os.NewSyscallError("write", syscall.EPIPE)}
	dbReset := fmt.Errorf("postgres: %w: %w", store.ErrUnavailable, reset)
	live := httptest.NewRequest("GET", "/v1/sandboxes", nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	gone := live.WithContext(ctx)
	sctx, scancel := context.WithCancelCause(context.Background())
	scancel(api.Errorf(api.CodeProviderUnavailable, "the daemon is stopping"))
	shutdown := live.WithContext(sctx)
	cases := []struct {
		name string
		gone bool
		err  error
		want bool
	}{
		{name: "database reset, client there", err: dbReset},
		{name: "backend reset, client there", err: fmt.Errorf("adapter: %w", reset)},
		{name: "broken pipe, client there", err: pipe},
		{name: "cancelled, client there", err: context.Canceled},
		{name: "broken pipe, client gone", gone: true, err: pipe, want: true},
		{name: "reset, client gone", gone: true, err: reset, want: true},
		{name: "cancelled, client gone", gone: true, err: context.Canceled, want: true},
	}
	for _, c := range cases {
		r := live
		if c.gone {
			r = gone
		}
		if got := clientGone(r, c.err); got != c.want {
			t.Errorf("%s: clientGone %v, want %v", c.name, got, c.want)
		}
	}
	if clientGone(shutdown, pipe) || clientGone(shutdown, context.Canceled) {
		t.Error("a request ended by the daemon's shutdown counts as the client hanging up")
	}

	// And as logged: the database reset under a live request is an Error.
	var buf bytes.Buffer
	s := &Server{log: slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	rec := httptest.NewRecorder()
	s.writeError(rec, live, dbReset)
	if rec.Code != 503 || !strings.Contains(buf.String(), "level=ERROR") {
		t.Fatalf("status %d, log %q: want 503 logged at ERROR", rec.Code, buf.String())
	}
}
