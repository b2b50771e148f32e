package adapterhttp_test

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/adapters/adapterhttp"
	"github.com/different-ai/differently/api"
)

// ndjsonServer answers every streamed exec with body, as a plugin might.
func ndjsonServer(t *testing.T, body func(io.Writer)) *adapterhttp.Client {
	return rawServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("stream") != "1" || r.Header.Get("Accept") != "application/x-ndjson" {
			t.Errorf("not a stream request: %s %v", r.URL, r.Header)
		}
		w.Header().Set(adapterhttp.ProtocolHeader, adapters.ProtocolVersion)
		w.Header().Set("Content-Type", "application/x-ndjson")
		body(w)
	})
}

func collect(t *testing.T, c *adapterhttp.Client) (adapters.ExitStatus, []api.ExecEvent, error) {
	t.Helper()
	var events []api.ExecEvent
	st, err := c.ExecStream(t.Context(), "r", api.ExecRequest{Command: "x"}, func(ev api.ExecEvent) error {
		events = append(events, ev)
		return nil
	})
	return st, events, err
}

func lines(s ...string) func(io.Writer) {
	return func(w io.Writer) { _, _ = io.WriteString(w, strings.Join(s, "\n")) }
}

func TestStreamReading(t *testing.T) {
	out := `{"stream":"stdout","data":"a\n"}`
	t.Run("exit code", func(t *testing.T) {
		c := ndjsonServer(t, lines(out, ``, `{"stream":"stderr","data":"b"}`, `{"exitCode":42}`, ""))
		st, events, err := collect(t, c)
		if err != nil || st.Code != 42 || st.TimedOut || len(events) != 2 || events[1] != (api.ExecEvent{Stream: "stderr", Data: "b"}) {
			t.Fatalf("%+v %+v %v", st, events, err)
		}
	})
	t.Run("final line without newline, then garbage ignored", func(t *testing.T) {
		c := ndjsonServer(t, lines(`{"exitCode":124,"timedOut":true}`, `not json`, `{"exitCode":1}`))
		st, _, err := collect(t, c)
		if err != nil || st != (adapters.ExitStatus{Code: 124, TimedOut: true}) {
			t.Fatalf("%+v %v", st, err)
		}
	})
	t.Run("no final event", func(t *testing.T) {
		c := ndjsonServer(t, lines(out, out, ""))
		_, events, err := collect(t, c)
		if e := wantCode(t, err, api.CodeProviderUnavailable); !strings.Contains(e.Message, "without a final event") || len(events) != 2 {
			t.Fatalf("%v after %d events", err, len(events))
		}
	})
	t.Run("error after start", func(t *testing.T) {
		c := ndjsonServer(t, lines(out, `{"error":"boom"}`, ""))
		_, events, err := collect(t, c)
		if e := wantCode(t, err, api.CodeProviderUnavailable); !strings.Contains(e.Message, "boom") || len(events) != 1 {
			t.Fatalf("%v after %d events", err, len(events))
		}
	})
	t.Run("error line with a code", func(t *testing.T) {
		// The protocol's error lines carry words only; a code a plugin adds anyway
		// does not make a failure after the status line anything but an outage.
		c := ndjsonServer(t, lines(out, `{"error":"gone","code":"not_found"}`, ""))
		_, _, err := collect(t, c)
		if e := wantCode(t, err, api.CodeProviderUnavailable); !strings.Contains(e.Message, "gone") {
			t.Fatal(err)
		}
	})
	t.Run("connection dropped mid-stream", func(t *testing.T) {
		// The server gives up after a flushed line: the connection closes and the
		// chunked body never ends.
		c := rawServer(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set(adapterhttp.ProtocolHeader, adapters.ProtocolVersion)
			w.Header().Set("Content-Type", "application/x-ndjson")
			_, _ = io.WriteString(w, out+"\n")
			http.NewResponseController(w).Flush()
			panic(http.ErrAbortHandler)
		})
		_, events, err := collect(t, c)
		if e := wantCode(t, err, api.CodeProviderUnavailable); !strings.Contains(e.Message, "unexpected EOF") || len(events) != 1 {
			t.Fatalf("%v after %d events", err, len(events))
		}
	})
	t.Run("malformed line", func(t *testing.T) {
		c := ndjsonServer(t, lines(out, `{"stream":`, `{"exitCode":0}`))
		_, _, err := collect(t, c)
		wantCode(t, err, api.CodeProviderUnavailable)
	})
	t.Run("line of exactly the limit", func(t *testing.T) {
		prefix, suffix := `{"stream":"stdout","data":"`, `"}`
		data := strings.Repeat("x", api.MaxStreamLineBytes-len(prefix)-len(suffix))
		c := ndjsonServer(t, lines(prefix+data+suffix, `{"exitCode":0}`))
		_, events, err := collect(t, c)
		if err != nil || len(events) != 1 || events[0].Data != data {
			t.Fatalf("%d events, %v", len(events), err)
		}
	})
	t.Run("line over the limit", func(t *testing.T) {
		c := ndjsonServer(t, func(w io.Writer) {
			_, _ = io.WriteString(w, `{"stream":"stdout","data":"`)
			_, _ = io.WriteString(w, strings.Repeat("x", api.MaxStreamLineBytes))
			_, _ = io.WriteString(w, "\"}\n{\"exitCode\":0}\n")
		})
		_, events, err := collect(t, c)
		if e := wantCode(t, err, api.CodeProviderUnavailable); !strings.Contains(e.Message, "8 MiB") || len(events) != 0 {
			t.Fatalf("%v after %d events", err, len(events))
		}
	})
	t.Run("not ndjson", func(t *testing.T) {
		c := rawServer(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set(adapterhttp.ProtocolHeader, adapters.ProtocolVersion)
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"exitCode":0,"stdout":"lost"}`)
		})
		_, _, err := collect(t, c)
		wantCode(t, err, api.CodeProviderUnavailable)
	})
	t.Run("error envelope", func(t *testing.T) {
		c := rawServer(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set(adapterhttp.ProtocolHeader, adapters.ProtocolVersion)
			w.WriteHeader(http.StatusConflict)
			_, _ = io.WriteString(w, `{"error":{"code":"invalid_state","message":"paused"}}`)
		})
		_, _, err := collect(t, c)
		wantCode(t, err, api.CodeInvalidState)
	})
}

func TestStreamEmitErrorAborts(t *testing.T) {
	_, c := serve(t, newMem(), "")
	inst := try(c.Create(t.Context(), adapters.CreateRequest{ID: "sbx_1", Installation: "i"})).ok(t)
	stop := errors.New("consumer gone")
	calls := 0
	_, err := c.ExecStream(t.Context(), inst.Ref, api.ExecRequest{Command: "words a b c"}, func(api.ExecEvent) error {
		calls++
		return stop
	})
	if !errors.Is(err, stop) || calls != 1 {
		t.Fatalf("error %v after %d calls", err, calls)
	}
	// The connection was dropped, not poisoned: the client still works.
	noErr(t, c.Health(t.Context()))
}

// Large output is split into events whose lines stay under the line limit, without
// cutting a character in two.
func TestStreamSplitsLargeOutput(t *testing.T) {
	mem := newMem()
	// "é" is two bytes and '<' escapes to six, so neither line length nor a cut point
	// can be guessed from the byte count.
	mem.bigData = strings.Repeat("é<", 1<<20) + "end"
	_, c := serve(t, mem, "")
	inst := try(c.Create(t.Context(), adapters.CreateRequest{ID: "sbx_1", Installation: "i"})).ok(t)
	var got strings.Builder
	n := 0
	_, err := c.ExecStream(t.Context(), inst.Ref, api.ExecRequest{Command: "big"}, func(ev api.ExecEvent) error {
		n++
		if !utf8.ValidString(ev.Data) {
			t.Errorf("event %d is not valid UTF-8", n)
		}
		got.WriteString(ev.Data)
		return nil
	})
	noErr(t, err)
	if got.String() != mem.bigData || n < 3 {
		t.Fatalf("got %d bytes in %d events, want %d bytes", got.Len(), n, len(mem.bigData))
	}
}
