package ndjson

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/api"
)

// lines reads back what a writer wrote, with ndjson's own decoder.
func lines(t *testing.T, body []byte) []api.ExecEvent {
	t.Helper()
	var evs []api.ExecEvent
	var d Decoder
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(nil, api.MaxStreamLineBytes+1)
	for sc.Scan() {
		ev, err := d.Decode(sc.Bytes())
		if err != nil {
			t.Fatalf("line %q: %v", sc.Bytes(), err)
		}
		evs = append(evs, ev)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return evs
}

func noError(http.ResponseWriter, error)    {}
func describe(err error) (string, api.Code) { return err.Error(), api.CodeOf(err) }

// TestEmitBytesIsEmit writes the same output through Emit and EmitBytes, large
// enough to be split, with a two-byte character across the 1 MiB mark: both must
// write the same bytes, in pieces of at most 1 MiB cut between characters.
func TestEmitBytesIsEmit(t *testing.T) {
	data := strings.Repeat("x", maxEventData-1) + "é" + strings.Repeat("\x00<\u2028\xff", 1000) + "tail"
	var bodies [2][]byte
	for i := range bodies {
		rec := httptest.NewRecorder()
		w := NewExecWriter(rec)
		var err error
		if i == 0 {
			err = w.Emit(api.ExecEvent{Stream: api.StreamStdout, Data: data})
		} else {
			err = w.EmitBytes(api.StreamStdout, []byte(data))
		}
		if err != nil {
			t.Fatal(err)
		}
		w.Finish(api.ExitEvent(3, false), nil, noError, describe)
		if rec.Code != http.StatusOK || rec.Header().Get("Content-Type") != ContentType || !rec.Flushed {
			t.Fatalf("status %d, headers %v, flushed %v", rec.Code, rec.Header(), rec.Flushed)
		}
		bodies[i] = rec.Body.Bytes()
	}
	if !bytes.Equal(bodies[0], bodies[1]) {
		t.Fatal("Emit and EmitBytes wrote different bytes")
	}
	evs := lines(t, bodies[0])
	var got strings.Builder
	for _, ev := range evs[:len(evs)-1] {
		if len(ev.Data) > maxEventData || !utf8.RuneStart(ev.Data[0]) || ev.Stream != api.StreamStdout {
			t.Fatalf("event of %d bytes on %q starting %q", len(ev.Data), ev.Stream, ev.Data[:1])
		}
		got.WriteString(ev.Data)
	}
	// \xff is the one byte JSON cannot carry; it comes back as U+FFFD.
	if want := strings.ReplaceAll(data, "\xff", "\ufffd"); got.String() != want || len(evs) != 3 {
		t.Fatalf("%d events carrying %d bytes, want 3 carrying %d", len(evs), got.Len(), len(want))
	}
	if last := evs[len(evs)-1]; last.ExitCode == nil || *last.ExitCode != 3 {
		t.Fatalf("final event %+v", last)
	}
}

func TestEmitAfterFinish(t *testing.T) {
	w := NewExecWriter(httptest.NewRecorder())
	w.Finish(api.ExitEvent(0, false), nil, noError, describe)
	if err := w.Emit(api.ExecEvent{Stream: api.StreamStdout, Data: "late"}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Emit after Finish: %v", err)
	}
	if err := w.EmitBytes(api.StreamStdout, []byte("late")); !errors.Is(err, ErrClosed) {
		t.Fatalf("EmitBytes after Finish: %v", err)
	}
}

// streamer is an adapter with ExecStream only; byteStreamer adds ExecStreamBytes.
type streamer struct {
	adapters.ExecutionAdapter
	calls *[]string
}

func (s streamer) ExecStream(_ context.Context, _ string, _ api.ExecRequest, emit func(api.ExecEvent) error) (adapters.ExitStatus, error) {
	*s.calls = append(*s.calls, "ExecStream")
	return adapters.ExitStatus{Code: 1}, emit(api.ExecEvent{Stream: api.StreamStderr, Data: "via strings"})
}

type byteStreamer struct{ streamer }

func (s byteStreamer) ExecStreamBytes(_ context.Context, _ string, _ api.ExecRequest, emit func(string, []byte) error) (adapters.ExitStatus, error) {
	*s.calls = append(*s.calls, "ExecStreamBytes")
	return adapters.ExitStatus{Code: 124, TimedOut: true}, emit(api.StreamStdout, []byte("via bytes"))
}

func TestExecPrefersByteStreamer(t *testing.T) {
	var calls []string
	for _, tc := range []struct {
		a    adapters.ExecutionAdapter
		want string
		code int
	}{
		{streamer{calls: &calls}, `{"stream":"stderr","data":"via strings"}` + "\n", 1},
		{byteStreamer{streamer{calls: &calls}}, `{"stream":"stdout","data":"via bytes"}` + "\n", 124},
	} {
		rec := httptest.NewRecorder()
		w := NewExecWriter(rec)
		final, err := w.Exec(context.Background(), tc.a, true, "ref", api.ExecRequest{Command: "x"})
		if err != nil || final.ExitCode == nil || *final.ExitCode != tc.code || rec.Body.String() != tc.want {
			t.Fatalf("Exec = %+v, %v; wrote %q", final, err, rec.Body.String())
		}
	}
	if strings.Join(calls, ",") != "ExecStream,ExecStreamBytes" {
		t.Fatalf("calls %v", calls)
	}
}
