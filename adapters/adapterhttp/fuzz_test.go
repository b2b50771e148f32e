package adapterhttp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/adapters/fake"
	"github.com/different-ai/differently/api"
)

var errStopEmit = errors.New("emit refused")

// streamOracle is what readStream should make of body, worked out line by line
// without a bufio.Scanner: the output events it emits and whether it ends with an
// exit status.
func streamOracle(body []byte, stopAfter int) (events []api.ExecEvent, status *adapters.ExitStatus, stopped bool) {
	for line := range bytes.SplitSeq(body, []byte("\n")) {
		line = bytes.TrimSuffix(line, []byte("\r"))
		if len(line) == 0 {
			continue
		}
		var ev api.ExecEvent
		if json.Unmarshal(line, &ev) != nil || ev.Error != "" {
			return events, nil, false
		}
		if ev.ExitCode != nil {
			return events, &adapters.ExitStatus{Code: *ev.ExitCode, TimedOut: ev.TimedOut}, false
		}
		if ev.Data == "" {
			continue
		}
		if ev.Stream != "stdout" && ev.Stream != "stderr" {
			return events, nil, false // only the two streams exist
		}
		events = append(events, api.ExecEvent{Stream: ev.Stream, Data: ev.Data})
		if len(events) == stopAfter {
			return events, nil, true
		}
	}
	return events, nil, false
}

// longLine is an output event line of exactly n bytes.
func longLine(n int) []byte {
	const head, tail = `{"stream":"stdout","data":"`, `"}`
	return []byte(head + strings.Repeat("x", n-len(head)-len(tail)) + tail)
}

// TestReadStreamLineLimit: a line one byte over api.MaxStreamLineBytes is refused
// before anything is emitted (too big an input for the fuzzer to choose; the line at
// the limit is stream_test.go's).
func TestReadStreamLineLimit(t *testing.T) {
	body := append(longLine(api.MaxStreamLineBytes+1), "\n{\"exitCode\":0}\n"...)
	emitted := 0
	_, err := readStream(bytes.NewReader(body), func(api.ExecEvent) error { emitted++; return nil })
	if emitted != 0 || api.CodeOf(err) != api.CodeProviderUnavailable || !strings.Contains(err.Error(), "8 MiB") {
		t.Fatalf("a line over the limit: %d events, %v", emitted, err)
	}
}

// FuzzReadStream feeds arbitrary bytes to the NDJSON reader of the adapter client.
// It never panics; it emits output events only (data set, no exit code or error),
// never anything after a final event, and exactly what a line-by-line reading says
// (output on a stream other than stdout and stderr ends it);
// it returns nil only when a final exit event was read, and otherwise
// provider_unavailable (or the emit callback's own error, which it returns as is).
// The 8 MiB line limit is TestReadStreamLineLimit's.
func FuzzReadStream(f *testing.F) {
	for _, s := range []string{
		"{\"stream\":\"stdout\",\"data\":\"hi\\n\"}\n{\"exitCode\":0}\n",
		"{\"stream\":\"stderr\",\"data\":\"e\"}\r\n{\"exitCode\":124,\"timedOut\":true}\r\n",
		"{\"exitCode\":3}",
		"{\"exitCode\":0}\n{\"stream\":\"stdout\",\"data\":\"after the end\"}\n",
		"{\"stream\":\"stdout\",\"data\":\"x\"}\n",
		"{\"error\":\"backend went away\"}\n",
		"{\"exitCode\":1,\"error\":\"both\"}\n",
		"\n\n\n{\"exitCode\":0}",
		"{\"stream\":\"stdout\"}\n{}\nnull\n{\"exitCode\":0}",
		"{\"exitCode\":99999999999999999999}\n",
		"{\"exitCode\":1.5}\n",
		"{\"exitCode\":null}\n",
		"{\"EXITCODE\":7}\n",
		"{\"data\":\"\xff\xfe\"}\n{\"exitCode\":0}",
		"{\"data\":\"a\\u0000b\"}\n{\"exitCode\":0}",
		"not json\n",
		"   \n{\"exitCode\":0}",
		"[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]\n",
		"{\"stream\":{\"nested\":{}}}\n",
		"\x00\x00\x00",
		"",
	} {
		f.Add([]byte(s), uint8(0))
	}
	f.Add([]byte("{\"stream\":\"stdout\",\"data\":\"a\"}\n{\"stream\":\"stdout\",\"data\":\"b\"}\n{\"exitCode\":0}"), uint8(1))
	f.Fuzz(func(t *testing.T, body []byte, stopAfter uint8) {
		var got []api.ExecEvent
		final := false
		status, err := readStream(bytes.NewReader(body), func(ev api.ExecEvent) error {
			if final {
				t.Fatalf("emit after the final event: %+v", ev)
			}
			if ev.Data == "" || ev.ExitCode != nil || ev.Error != "" || ev.TimedOut {
				t.Fatalf("emitted a non-output event %+v", ev)
			}
			got = append(got, ev)
			if len(got) == int(stopAfter) {
				return errStopEmit
			}
			return nil
		})
		final = true

		want, wantStatus, stopped := streamOracle(body, int(stopAfter))
		if len(got) != len(want) {
			t.Fatalf("emitted %d events, want %d: %+v vs %+v", len(got), len(want), got, want)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("event %d = %+v, want %+v", i, got[i], want[i])
			}
		}
		switch {
		case stopped:
			if !errors.Is(err, errStopEmit) {
				t.Fatalf("emit's error was not returned: %v", err)
			}
		case wantStatus != nil:
			if err != nil || status != *wantStatus {
				t.Fatalf("readStream = %+v, %v; want %+v", status, err, *wantStatus)
			}
		default:
			if err == nil || api.CodeOf(err) != api.CodeProviderUnavailable {
				t.Fatalf("readStream = %+v, %v; want a provider_unavailable error", status, err)
			}
			if status != (adapters.ExitStatus{}) {
				t.Fatalf("a failed stream reported status %+v", status)
			}
		}
	})
}

// Statuses the protocol documents for the create and exec routes.
var documentedStatus = map[int]bool{
	http.StatusOK: true, http.StatusBadRequest: true, http.StatusNotFound: true, http.StatusConflict: true,
	http.StatusRequestEntityTooLarge: true, http.StatusNotImplemented: true, http.StatusServiceUnavailable: true,
}

// FuzzHandlerRequests posts arbitrary bodies to POST /instances and POST
// /instances/{ref}/exec (buffered and streamed) of a Handler over the fake adapter.
// The status is always a documented one and never 500, an error answer is the
// envelope with the code matching the status, a malformed body is 400 or 413, and a
// streamed answer ends with exactly one final event.
func FuzzHandlerRequests(f *testing.F) {
	for _, s := range []string{
		`{"id":"sbx_1","installation":"inst"}`,
		`{"id":"sbx_2","installation":"inst","template":"t","resources":{"cpu":1,"memoryMiB":256},"env":{"A":"1"},"labels":{"a":"b"},"ttlSeconds":5}`,
		`{"id":"sbx_1","installation":"inst","unknown":1}`,
		`{"id":"sbx_1","installation":"inst"} {"id":"again"}`,
		`{"id":"sbx_1","installation":"inst"} trailing`,
		`{"id":"x","installation":"i","resources":{"cpu":-1}}`,
		`{"id":"x","installation":"i","fromSnapshot":"snap_missing"}`,
		`{"id":"x","installation":"i","ttlSeconds":1e400}`,
		`{"command":"echo hi"}`,
		`{"args":["ls","-l"],"env":{"A":"b"},"cwd":"d","stdin":"in","timeoutSeconds":10}`,
		`{"command":"x","timeoutSeconds":7201}`,
		`{"command":"x","timeoutSeconds":-9223372036854775809}`,
		`{"command":"a\u0000b"}`,
		`{"args":[""]}`,
		`{"command":"\xff"}`,
		`{"command":` + strings.Repeat(`[`, 200),
		`{"command":"x"`,
		``,
		`null`,
		`[]`,
		`"string"`,
		"\x00\x01\x02",
	} {
		for route := range uint8(3) {
			f.Add(route, []byte(s))
		}
	}
	a := fake.New(fake.Config{})
	inst, err := a.Create(context.Background(), adapters.CreateRequest{ID: "sbx_fuzz", Installation: "inst"})
	if err != nil {
		f.Fatal(err)
	}
	h := Handler(a, "")
	f.Fuzz(func(t *testing.T, route uint8, body []byte) {
		target := BasePath + "/instances"
		switch route % 3 {
		case 1:
			target += "/" + inst.Ref + "/exec"
		case 2:
			target += "/" + inst.Ref + "/exec?stream=1"
		}
		req := httptest.NewRequest(http.MethodPost, target, bytes.NewReader(body))
		req.Host = "127.0.0.1" // a tokenless adapter answers loopback hosts only
		req.Header.Set("Content-Type", contentTypeJSON)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		status, raw := rec.Code, rec.Body.Bytes()

		if !documentedStatus[status] {
			t.Fatalf("POST %s %q: status %d: %s", target, body, status, raw)
		}
		if got := rec.Header().Get(ProtocolHeader); got != adapters.ProtocolVersion {
			t.Fatalf("protocol header %q", got)
		}
		malformed := !json.Valid(body)
		if status != http.StatusOK {
			var env struct{ Error *api.Error }
			if err := json.Unmarshal(raw, &env); err != nil || env.Error == nil {
				t.Fatalf("status %d without the error envelope: %s", status, raw)
			}
			if env.Error.Code.HTTPStatus() != status {
				t.Fatalf("status %d with code %s", status, env.Error.Code)
			}
			if malformed && status != http.StatusBadRequest && status != http.StatusRequestEntityTooLarge {
				t.Fatalf("malformed body %q answered %d", body, status)
			}
			return
		}
		if malformed {
			t.Fatalf("malformed body %q accepted: %s", body, raw)
		}
		if route%3 == 2 {
			if ct := rec.Header().Get("Content-Type"); ct != contentTypeNDJSON {
				t.Fatalf("streamed exec answered %s: %s", ct, raw)
			}
			if _, err := readStream(bytes.NewReader(raw), func(api.ExecEvent) error { return nil }); err != nil {
				t.Fatalf("streamed answer %q: %v", raw, err)
			}
		}
	})
}
