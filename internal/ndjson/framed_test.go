package ndjson

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/internal/frames"
)

// readFrames reads back what a framed writer wrote: each frame's kind and payload.
func readFrames(t *testing.T, body []byte) (kinds []frames.Kind, payloads []string) {
	t.Helper()
	fr := frames.NewReader(bytes.NewReader(body))
	for {
		k, p, err := fr.Next()
		if err == io.EOF {
			return kinds, payloads
		}
		if err != nil {
			t.Fatal(err)
		}
		kinds, payloads = append(kinds, k), append(payloads, string(p))
	}
}

// TestFramedIsNDJSON writes the same output and final event to an NDJSON and a
// framed writer: the frames are the lines, output cut at the same places, carrying
// the raw bytes where the lines carry JSON strings, and the final frame is the last
// line without its newline.
func TestFramedIsNDJSON(t *testing.T) {
	data := strings.Repeat("x", maxEventData-1) + "é" + strings.Repeat("\x00<\u2028\xff", 1000) + "tail"
	for _, final := range []api.ExecEvent{api.ExitEvent(3, false), api.ExitEvent(124, true)} {
		var recs [2]*httptest.ResponseRecorder
		for i, newWriter := range []func(http.ResponseWriter) *ExecWriter{NewExecWriter, NewFramedExecWriter} {
			recs[i] = httptest.NewRecorder()
			w := newWriter(recs[i])
			if err := w.EmitBytes(api.StreamStdout, []byte(data)); err != nil {
				t.Fatal(err)
			}
			if err := w.Emit(api.ExecEvent{Stream: api.StreamStderr, Data: "\x00err"}); err != nil {
				t.Fatal(err)
			}
			w.Finish(final, nil, noError, describe)
		}
		if ct := recs[1].Header().Get("Content-Type"); ct != frames.ContentType || !recs[1].Flushed || recs[1].Code != http.StatusOK {
			t.Fatalf("status %d, content type %q, flushed %v", recs[1].Code, ct, recs[1].Flushed)
		}
		evs := lines(t, recs[0].Body.Bytes())
		kinds, payloads := readFrames(t, recs[1].Body.Bytes())
		if len(kinds) != len(evs) || len(evs) != 4 {
			t.Fatalf("%d frames, %d lines", len(kinds), len(evs))
		}
		var raw strings.Builder
		for i, ev := range evs[:len(evs)-1] {
			if kinds[i].String() != ev.Stream || strings.ToValidUTF8(payloads[i], "\ufffd") != strings.ToValidUTF8(ev.Data, "\ufffd") {
				t.Fatalf("frame %d: %v of %d bytes, line %q of %d bytes", i, kinds[i], len(payloads[i]), ev.Stream, len(ev.Data))
			}
			if ev.Stream == api.StreamStdout {
				raw.WriteString(payloads[i])
			}
		}
		if raw.String() != data {
			t.Fatal("the stdout frames do not carry the bytes emitted")
		}
		lastLine := recs[0].Body.String()[strings.LastIndexByte(recs[0].Body.String()[:recs[0].Body.Len()-1], '\n')+1:]
		if kinds[3] != frames.Final || payloads[3]+"\n" != lastLine {
			t.Fatalf("final frame %v %q, last line %q", kinds[3], payloads[3], lastLine)
		}
	}
}

// TestFramedErrors: an error before any output is still an error envelope; after
// output it is a final frame carrying the error; an output stream other than
// stdout and stderr, which has no kind of frame, is refused.
func TestFramedErrors(t *testing.T) {
	rec := httptest.NewRecorder()
	w := NewFramedExecWriter(rec)
	w.Finish(api.ExecEvent{}, errors.New("boom"), func(w http.ResponseWriter, err error) {
		w.WriteHeader(http.StatusServiceUnavailable)
	}, describe)
	if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Content-Type") == frames.ContentType {
		t.Fatalf("an error before output: status %d, content type %q", rec.Code, rec.Header().Get("Content-Type"))
	}

	rec = httptest.NewRecorder()
	w = NewFramedExecWriter(rec)
	if err := w.Emit(api.ExecEvent{Stream: api.StreamStdout, Data: "out"}); err != nil {
		t.Fatal(err)
	}
	if err := w.Emit(api.ExecEvent{Stream: "stdin", Data: "x"}); err == nil {
		t.Fatal("an output stream named stdin was framed")
	}
	w.Finish(api.ExecEvent{}, errors.New(`broke "here"`), noError, describe)
	kinds, payloads := readFrames(t, rec.Body.Bytes())
	if len(kinds) != 2 || payloads[0] != "out" || kinds[1] != frames.Final || payloads[1] != `{"error":"broke \"here\"","code":"internal"}` {
		t.Fatalf("frames %v %q", kinds, payloads)
	}
}
