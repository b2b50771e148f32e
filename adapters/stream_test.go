package adapters_test

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/api"
)

// execOnly answers Exec with a fixed result; streaming adds a Streamer that emits
// its own events, so the test can tell which path ExecStream took.
type execOnly struct {
	base
	res api.ExecResult
	err error
}

func (e execOnly) Exec(context.Context, string, api.ExecRequest) (api.ExecResult, error) {
	return e.res, e.err
}

type streaming struct {
	execOnly
	events []api.ExecEvent
	status adapters.ExitStatus
}

func (s streaming) ExecStream(_ context.Context, _ string, _ api.ExecRequest, emit func(api.ExecEvent) error) (adapters.ExitStatus, error) {
	for _, ev := range s.events {
		if err := emit(ev); err != nil {
			return adapters.ExitStatus{}, err
		}
	}
	return s.status, s.err
}

func TestExecStreamHelper(t *testing.T) {
	boom := errors.New("boom")
	out := func(stream, data string) api.ExecEvent { return api.ExecEvent{Stream: stream, Data: data} }
	streamed := streaming{
		execOnly: execOnly{res: api.ExecResult{Stdout: "buffered"}},
		events:   []api.ExecEvent{out("stdout", "a"), out("stderr", "b"), out("stdout", "c")},
		status:   adapters.ExitStatus{Code: 124, TimedOut: true},
	}
	tests := []struct {
		name       string
		a          adapters.ExecutionAdapter
		streaming  bool
		wantEvents []api.ExecEvent
		wantFinal  api.ExecEvent
		wantErr    error
	}{
		{"streamer streams", streamed, true, streamed.events, api.ExitEvent(124, true), nil},
		{"streamer not streaming falls back", streamed, false, []api.ExecEvent{out("stdout", "buffered")}, api.ExitEvent(0, false), nil},
		{"no streamer falls back", execOnly{res: api.ExecResult{ExitCode: 2, Stdout: "o", Stderr: "e"}}, true,
			[]api.ExecEvent{out("stdout", "o"), out("stderr", "e")}, api.ExitEvent(2, false), nil},
		{"fallback skips empty stdout", execOnly{res: api.ExecResult{ExitCode: 1, Stderr: "e"}}, false,
			[]api.ExecEvent{out("stderr", "e")}, api.ExitEvent(1, false), nil},
		{"fallback with no output", execOnly{res: api.ExecResult{ExitCode: 124, TimedOut: true}}, false,
			nil, api.ExitEvent(124, true), nil},
		{"exec error", execOnly{err: boom}, false, nil, api.ExecEvent{}, boom},
		{"stream error", streaming{execOnly: execOnly{err: boom}}, true, nil, api.ExecEvent{}, boom},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []api.ExecEvent
			final, err := adapters.ExecStream(context.Background(), tt.a, tt.streaming, "ref", api.ExecRequest{Command: "x"},
				func(ev api.ExecEvent) error { got = append(got, ev); return nil })
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if !reflect.DeepEqual(got, tt.wantEvents) {
				t.Errorf("events = %+v, want %+v", got, tt.wantEvents)
			}
			if !reflect.DeepEqual(final, tt.wantFinal) {
				t.Errorf("final = %+v, want %+v", final, tt.wantFinal)
			}
			if err == nil && !final.IsFinal() {
				t.Error("returned event is not final")
			}
		})
	}
}

func TestExecStreamHelperEmitError(t *testing.T) {
	stop := errors.New("client gone")
	for _, tt := range []struct {
		name      string
		a         adapters.ExecutionAdapter
		streaming bool
	}{
		{"streaming", streaming{events: []api.ExecEvent{{Stream: "stdout", Data: "a"}}}, true},
		{"fallback", execOnly{res: api.ExecResult{Stdout: "a", Stderr: "b"}}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			calls := 0
			_, err := adapters.ExecStream(context.Background(), tt.a, tt.streaming, "ref", api.ExecRequest{Command: "x"},
				func(api.ExecEvent) error { calls++; return stop })
			if !errors.Is(err, stop) || calls != 1 {
				t.Errorf("err = %v after %d emits, want %v after 1", err, calls, stop)
			}
		})
	}
}
