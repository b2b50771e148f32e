package client_test

import (
	"encoding/binary"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/client"
	"github.com/different-ai/differently/internal/frames"
)

// framesServer is streamServer answering in frames: it checks that the client asked
// for them, and writes body as is.
func framesServer(t *testing.T, body []byte) *client.Client {
	t.Helper()
	return streamServer(t, func(w http.ResponseWriter, r *http.Request) {
		if !strings.Contains(r.Header.Get("Accept"), frames.ContentType) {
			t.Errorf("Accept %q does not name frames", r.Header.Get("Accept"))
		}
		w.Header().Set("Content-Type", frames.ContentType)
		_, _ = w.Write(body)
	})
}

func frame(k frames.Kind, payload string) []byte { return frames.Append(nil, k, payload) }

func cat(parts ...[]byte) []byte {
	var out []byte
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// TestExecStreamFrames: output frames become output events carrying their bytes as
// text (NUL as it is, a byte of invalid UTF-8 as U+FFFD, as NDJSON would carry it),
// the final frame the final event; nothing after it is read.
func TestExecStreamFrames(t *testing.T) {
	c := framesServer(t, cat(
		frame(frames.Stdout, "out\x00\n"),
		frame(frames.Stderr, "bad \xff\xfe byte, é\u2028"),
		frame(frames.Stdout, ""),
		frame(frames.Final, `{"exitCode":124,"timedOut":true}`),
		frame(frames.Stdout, "after the end"),
	))
	got := collect(c, t)
	want := []api.ExecEvent{
		{Stream: api.StreamStdout, Data: "out\x00\n"},
		{Stream: api.StreamStderr, Data: "bad \ufffd\ufffd byte, é\u2028"},
		{Stream: api.StreamStdout},
		api.ExitEvent(124, true),
	}
	if len(got.events) != len(want) {
		t.Fatalf("%d events %+v, want %d", len(got.events), got.events, len(want))
	}
	for i := range want {
		g, w := got.events[i], want[i]
		if got.errs[i] != nil || g.Stream != w.Stream || g.Data != w.Data || g.TimedOut != w.TimedOut || (g.ExitCode == nil) != (w.ExitCode == nil) ||
			g.ExitCode != nil && *g.ExitCode != *w.ExitCode {
			t.Fatalf("event %d: %+v, %v; want %+v", i, g, got.errs[i], w)
		}
	}

	// A final frame carrying an error ends the stream with it, as an NDJSON line does.
	c = framesServer(t, cat(frame(frames.Stderr, "oops"), frame(frames.Final, `{"error":"backend went away"}`)))
	got = collect(c, t)
	if len(got.events) != 2 || got.errs[0] != nil || got.events[1].Error != "backend went away" ||
		got.errs[1] == nil || !strings.Contains(got.errs[1].Error(), "backend went away") {
		t.Fatalf("an error in the final frame: %+v", got)
	}
}

// TestExecStreamFrameLimit: a frame of exactly api.MaxStreamLineBytes is read; a
// header announcing one byte more ends the stream with an error naming the limit,
// after the events before it and before reading the frame.
func TestExecStreamFrameLimit(t *testing.T) {
	big := strings.Repeat("x", api.MaxStreamLineBytes)
	got := collect(framesServer(t, cat(frame(frames.Stdout, big), frame(frames.Final, `{"exitCode":0}`))), t)
	if len(got.events) != 2 || got.errs[0] != nil || got.errs[1] != nil || got.events[0].Data != big || !got.events[1].IsFinal() {
		t.Fatalf("a frame at the limit: %d events, errors %v", len(got.events), got.errs)
	}

	over := binary.BigEndian.AppendUint32([]byte{byte(frames.Stdout)}, api.MaxStreamLineBytes+1)
	got = collect(framesServer(t, cat(frame(frames.Stdout, "before"), over, []byte(big), []byte("x"), frame(frames.Final, `{"exitCode":0}`))), t)
	if len(got.events) != 2 || got.events[0].Data != "before" || got.errs[0] != nil || got.errs[1] == nil {
		t.Fatalf("a frame over the limit: %d events, errors %v", len(got.events), got.errs)
	}
	if msg := got.errs[1].Error(); !strings.Contains(msg, strconv.Itoa(api.MaxStreamLineBytes+1)+" bytes, over the limit of "+strconv.Itoa(api.MaxStreamLineBytes)) {
		t.Fatalf("the error does not name the limit: %v", msg)
	}
	if errors.Is(got.errs[1], client.ErrStreamIncomplete) {
		t.Fatalf("reported as a cut stream: %v", got.errs[1])
	}
}

// TestExecStreamBadFrames: each malformed stream ends with one error after the
// events before it; a cut one with ErrStreamIncomplete.
func TestExecStreamBadFrames(t *testing.T) {
	out := frame(frames.Stdout, "ok")
	for _, tc := range []struct {
		name       string
		tail       []byte
		incomplete bool
		says       string
	}{
		{"no final frame", nil, true, "without a final event"},
		{"cut in a header", []byte{byte(frames.Final), 0, 0}, true, "cut inside a frame"},
		{"cut in a payload", frame(frames.Final, `{"exitCode":0}`)[:10], true, "cut inside a frame"},
		{"unknown kind", frame(7, "x"), false, "unknown frame kind: 7"},
		{"final frame that is not JSON", frame(frames.Final, "exit 0"), false, "bad final frame"},
		{"final frame without an exit", frame(frames.Final, `{"stream":"stdout","data":"x"}`), false, "neither exitCode nor error"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := collect(framesServer(t, cat(out, tc.tail)), t)
			if len(got.events) != 2 || got.events[0].Data != "ok" || got.errs[0] != nil || got.errs[1] == nil {
				t.Fatalf("%d events, errors %v", len(got.events), got.errs)
			}
			if errors.Is(got.errs[1], client.ErrStreamIncomplete) != tc.incomplete || !strings.Contains(got.errs[1].Error(), tc.says) {
				t.Fatalf("error %v", got.errs[1])
			}
		})
	}
}

// TestExecStreamFallsBackToNDJSON: a daemon without frames ignores the Accept that
// names them and answers NDJSON, which the client reads as before.
func TestExecStreamFallsBackToNDJSON(t *testing.T) {
	c := streamServer(t, func(w http.ResponseWriter, r *http.Request) {
		accept := r.Header.Get("Accept")
		if !strings.HasPrefix(accept, frames.ContentType) || !strings.Contains(accept, "application/x-ndjson") {
			t.Errorf("Accept %q: frames first, NDJSON as the fallback", accept)
		}
		_, _ = io.WriteString(w, `{"stream":"stdout","data":"\u0000old\ufffd"}`+"\n"+`{"exitCode":3}`+"\n")
	})
	got := collect(c, t)
	if len(got.events) != 2 || got.errs[0] != nil || got.errs[1] != nil || got.events[0].Data != "\x00old\ufffd" ||
		got.events[1].ExitCode == nil || *got.events[1].ExitCode != 3 {
		t.Fatalf("got %+v", got)
	}
}
