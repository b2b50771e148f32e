package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/adapters/fake"
	"github.com/different-ai/differently/api"
)

// streamDropper is the fake as `adapter serve` serves it: a streamed exec that the
// fake's execStreamDropRate cut short (its error wraps fake.ErrStreamDropped) loses
// its connection instead of ending with an {"error": ...} line, the way a backend
// that crashes or a network that breaks ends a stream. Every other call, and every
// optional interface, is the fake's own.
type streamDropper struct {
	*fake.Adapter
	log io.Writer
}

// ExecStream aborts the HTTP answer on an injected drop by panicking with
// http.ErrAbortHandler, which is how a handler tells net/http to give up on an
// answer it has started: the server closes the connection without the chunked
// body's last chunk, and logs nothing. The output emitted before has been flushed.
func (d streamDropper) ExecStream(ctx context.Context, ref string, req api.ExecRequest, emit func(api.ExecEvent) error) (adapters.ExitStatus, error) {
	st, err := d.Adapter.ExecStream(ctx, ref, req, emit)
	if errors.Is(err, fake.ErrStreamDropped) {
		fmt.Fprintf(d.log, "adapter serve: dropped the connection of a streamed exec in %s (execStreamDropRate)\n", ref)
		panic(http.ErrAbortHandler)
	}
	return st, err
}
