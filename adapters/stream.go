package adapters

import (
	"context"

	"github.com/different-ai/differently/api"
)

// ExecStream runs req on a and emits its output: as produced when a is a Streamer and
// streaming is among its effective features, otherwise as one stdout and one stderr
// event after a buffered Exec. It returns the final event, which the caller sends.
// An error from emit or from the adapter is returned as is.
func ExecStream(ctx context.Context, a ExecutionAdapter, streaming bool, ref string, req api.ExecRequest, emit func(api.ExecEvent) error) (api.ExecEvent, error) {
	if s, ok := a.(Streamer); ok && streaming {
		st, err := s.ExecStream(ctx, ref, req, emit)
		if err != nil {
			return api.ExecEvent{}, err
		}
		return api.ExitEvent(st.Code, st.TimedOut), nil
	}
	res, err := a.Exec(ctx, ref, req)
	if err != nil {
		return api.ExecEvent{}, err
	}
	for _, ev := range []api.ExecEvent{{Stream: api.StreamStdout, Data: res.Stdout}, {Stream: api.StreamStderr, Data: res.Stderr}} {
		if ev.Data == "" {
			continue
		}
		if err := emit(ev); err != nil {
			return api.ExecEvent{}, err
		}
	}
	return api.ExitEvent(res.ExitCode, res.TimedOut), nil
}
