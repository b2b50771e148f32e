package adapterhttp

import (
	"bufio"
	"errors"
	"io"
	"log"
	"net/http"
	"runtime/debug"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/internal/frames"
	"github.com/different-ai/differently/internal/ndjson"
)

// serveStream runs a streamed exec. The caller has checked the request and that the
// adapter streams.
func (h *handler) serveStream(w http.ResponseWriter, r *http.Request, req api.ExecRequest) {
	s := ndjson.NewExecWriter(w)
	// The protocol's error line carries words only: its clients read any failure
	// after the status line as provider_unavailable.
	describe := func(err error) (string, api.Code) { return h.scrubString(err.Error()), "" }
	defer func() {
		if p := recover(); p != nil {
			if p == http.ErrAbortHandler {
				panic(p)
			}
			log.Printf("adapterhttp: panic in streamed exec on %s: %v\n%s", r.URL.Path, p, debug.Stack())
			s.Finish(api.ExecEvent{}, errPanic, h.writeError, describe)
		}
	}()
	final, err := s.Exec(r.Context(), h.a, true, r.PathValue("ref"), req)
	s.Finish(final, err, h.writeError, describe)
}

// readStream reads an NDJSON exec stream, calling emit for each output event, up to
// and including the final event. Whatever follows the final event is ignored.
func readStream(body io.Reader, emit func(api.ExecEvent) error) (adapters.ExitStatus, error) {
	sc := bufio.NewScanner(body)
	// +1 leaves room for the newline, so a line of exactly the limit is accepted.
	sc.Buffer(make([]byte, 0, 64<<10), api.MaxStreamLineBytes+1)
	var dec ndjson.Decoder
	for sc.Scan() {
		line := sc.Bytes()
		if len(line) == 0 {
			continue
		}
		ev, err := dec.Decode(line)
		if err != nil {
			return adapters.ExitStatus{}, adapters.Unavailable("adapter sent a malformed stream line: %v", err)
		}
		if ev.Error != "" {
			// The code was lost when the status line went out; provider_unavailable is
			// the reading that makes the control plane retry rather than give up.
			return adapters.ExitStatus{}, adapters.Unavailable("adapter stream failed: %s", ev.Error)
		}
		if ev.ExitCode != nil {
			return adapters.ExitStatus{Code: *ev.ExitCode, TimedOut: ev.TimedOut}, nil
		}
		if ev.Data == "" {
			continue
		}
		if _, ok := frames.OutputKind(ev.Stream); !ok {
			// Passed on, a made-up stream would reach NDJSON tenants as it is and
			// break framed ones, whose frames know only the two.
			return adapters.ExitStatus{}, adapters.Unavailable("adapter sent output on a stream named %q; only stdout and stderr exist", ev.Stream)
		}
		if err := emit(api.ExecEvent{Stream: ev.Stream, Data: ev.Data}); err != nil {
			return adapters.ExitStatus{}, err
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return adapters.ExitStatus{}, adapters.Unavailable("adapter sent a stream line over %d MiB", api.MaxStreamLineBytes>>20)
		}
		return adapters.ExitStatus{}, adapters.Unavailable("reading the adapter stream failed: %v", err)
	}
	return adapters.ExitStatus{}, adapters.Unavailable("adapter stream ended without a final event")
}
