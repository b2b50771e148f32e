package sandboxes

import (
	"context"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/server/store"
)

// Command is a command about to run in a running sandbox: Command checks the request
// and the sandbox, so that whatever is wrong with either is known before any output.
type Command struct {
	t   target
	req api.ExecRequest
}

// Command prepares req to run in sandbox id. Exec is part of the adapter contract's
// required interface: no feature is checked.
func (s *Service) Command(ctx context.Context, c Caller, id string, req api.ExecRequest) (*Command, error) {
	if err := req.Validate(); err != nil {
		return nil, err
	}
	t, err := s.operate(ctx, c, id, "exec", "", store.StateRunning)
	if err != nil {
		return nil, err
	}
	return &Command{t: t, req: req}, nil
}

// Run runs the command to its end and returns its whole output. ctx is the
// adapter's: cancelling it (a caller that hangs up) cancels the command.
func (x *Command) Run(ctx context.Context) (api.ExecResult, error) {
	res, err := x.t.view.Adapter.Exec(ctx, x.t.sb.BackendRef, x.req)
	if err != nil {
		return res, adapterError(err, "exec", x.t.view)
	}
	return res, nil
}

// Output receives a streamed command's output events (internal/ndjson's ExecWriter
// is one). EmitBytes is Emit of {Stream: stream, Data: string(data)} without making
// the string; data is used only during the call.
type Output interface {
	Emit(ev api.ExecEvent) error
	EmitBytes(stream string, data []byte) error
}

// Stream runs the command, handing out its output as produced where the pool
// streams exec (exec.stream), and otherwise as one stdout and one stderr event after
// it ended (adapters.ExecStream). It returns the final event, which the caller
// sends.
func (x *Command) Stream(ctx context.Context, out Output) (api.ExecEvent, error) {
	a, ref := x.t.view.Adapter, x.t.sb.BackendRef
	streaming := x.t.view.Supports(adapters.FeatureExecStream)
	var final api.ExecEvent
	var err error
	if b, ok := a.(adapters.ByteStreamer); ok && streaming {
		// The fast path: output as bytes, without a string per event.
		var st adapters.ExitStatus
		if st, err = b.ExecStreamBytes(ctx, ref, x.req, out.EmitBytes); err == nil {
			final = api.ExitEvent(st.Code, st.TimedOut)
		}
	} else {
		final, err = adapters.ExecStream(ctx, a, streaming, ref, x.req, out.Emit)
	}
	if err != nil {
		return api.ExecEvent{}, adapterError(err, "exec", x.t.view)
	}
	return final, nil
}

// CanFeedStdin says whether the command's pool can feed its stdin while it runs
// (exec.stdin), as StreamStdin needs: nil when it can, unsupported_operation
// naming the pool when not.
func (x *Command) CanFeedStdin() error {
	if _, ok := x.t.view.Adapter.(adapters.StdinStreamer); ok && x.t.view.Supports(adapters.FeatureExecStdin) {
		return nil
	}
	return unsupported("feeding stdin to a running command", x.t.view)
}

// StreamStdin is Stream with the command's stdin fed from stdin while it runs:
// each piece received is written to it, and closing stdin closes it (see
// adapters.StdinStreamer). A pool without exec.stdin refuses with
// unsupported_operation naming it.
func (x *Command) StreamStdin(ctx context.Context, stdin <-chan []byte, out Output) (api.ExecEvent, error) {
	if err := x.CanFeedStdin(); err != nil {
		return api.ExecEvent{}, err
	}
	st, err := x.t.view.Adapter.(adapters.StdinStreamer).ExecStdin(ctx, x.t.sb.BackendRef, x.req, stdin, out.EmitBytes)
	if err != nil {
		return api.ExecEvent{}, adapterError(err, "exec", x.t.view)
	}
	return api.ExitEvent(st.Code, st.TimedOut), nil
}

// CanUsePTY says whether the command's pool can run it on a terminal (pty): nil
// when it can, unsupported_operation naming the pool when not.
func (x *Command) CanUsePTY() error {
	if _, ok := x.t.view.Adapter.(adapters.PTYExec); ok && x.t.view.Supports(adapters.FeaturePTY) {
		return nil
	}
	return unsupported("a terminal (pty)", x.t.view)
}

// StreamPTY runs the command on a terminal of size (see adapters.PTYExec): input
// is typed on it, each size from resize resizes it, and its output goes to out
// as stdout.
func (x *Command) StreamPTY(ctx context.Context, size adapters.TermSize, input <-chan []byte, resize <-chan adapters.TermSize, out Output) (api.ExecEvent, error) {
	if err := x.CanUsePTY(); err != nil {
		return api.ExecEvent{}, err
	}
	st, err := x.t.view.Adapter.(adapters.PTYExec).ExecPTY(ctx, x.t.sb.BackendRef, x.req, size, input, resize, out.EmitBytes)
	if err != nil {
		return api.ExecEvent{}, adapterError(err, "exec", x.t.view)
	}
	return api.ExitEvent(st.Code, st.TimedOut), nil
}
