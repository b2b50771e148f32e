package adapterhttp

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"log"
	"net/http"
	"runtime/debug"
	"sync"
	"unicode/utf8"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/api"
)

// maxEventData bounds the data of one streamed event. JSON escaping can grow a byte to
// six (\u00XX), so 1 MiB of data always encodes to a line under MaxStreamLineBytes.
const maxEventData = 1 << 20

var errStreamClosed = errors.New("adapterhttp: emit called after ExecStream returned")

// ndjsonWriter writes the events of one streamed exec. It sends the 200 status only
// with the first line, so that an error before any output still reaches the client
// as an envelope with its code. Its mutex serialises emit against the final event
// and keeps a misbehaving adapter that emits after returning from writing to a
// finished response.
type ndjsonWriter struct {
	w  http.ResponseWriter
	rc *http.ResponseController

	mu      sync.Mutex
	started bool
	closed  bool
}

func (s *ndjsonWriter) writeLocked(ev api.ExecEvent) error {
	line, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	if !s.started {
		s.started = true
		h := s.w.Header()
		h.Set("Content-Type", contentTypeNDJSON)
		h.Set("Cache-Control", "no-store")
		h.Set("X-Content-Type-Options", "nosniff")
		s.w.WriteHeader(http.StatusOK)
	}
	if _, err := s.w.Write(append(line, '\n')); err != nil {
		return err
	}
	// Without a flush, output would sit in the server's buffer and the stream would
	// arrive in bursts, defeating its purpose.
	if err := s.rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	return nil
}

// emit forwards output events. Only Stream and Data are copied, so an adapter cannot
// end the stream early with a final event of its own.
func (s *ndjsonWriter) emit(ev api.ExecEvent) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errStreamClosed
	}
	data := ev.Data
	for len(data) > 0 {
		n := min(len(data), maxEventData)
		// Cut on a rune boundary: json.Marshal would replace half a character with
		// U+FFFD on both sides of the cut.
		for n < len(data) && n > maxEventData-utf8.UTFMax && !utf8.RuneStart(data[n]) {
			n--
		}
		if err := s.writeLocked(api.ExecEvent{Stream: ev.Stream, Data: data[:n]}); err != nil {
			return err
		}
		data = data[n:]
	}
	return nil
}

// finish sends the final event or, before the stream started, the error envelope.
func (s *ndjsonWriter) finish(h *handler, final api.ExecEvent, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	switch {
	case err == nil:
		_ = s.writeLocked(final)
	case !s.started:
		h.writeError(s.w, err)
	default:
		_ = s.writeLocked(api.ExecEvent{Error: h.scrubString(err.Error())})
	}
}

// serveStream runs a streamed exec. The caller has checked the request and that the
// adapter streams.
func (h *handler) serveStream(w http.ResponseWriter, r *http.Request, req api.ExecRequest) {
	s := &ndjsonWriter{w: w, rc: http.NewResponseController(w)}
	defer func() {
		if p := recover(); p != nil {
			if p == http.ErrAbortHandler {
				panic(p)
			}
			log.Printf("adapterhttp: panic in streamed exec on %s: %v\n%s", r.URL.Path, p, debug.Stack())
			s.finish(h, api.ExecEvent{}, errPanic)
		}
	}()
	final, err := adapters.ExecStream(r.Context(), h.a, true, r.PathValue("ref"), req, s.emit)
	s.finish(h, final, err)
}

// readStream reads an NDJSON exec stream, calling emit for each output event, up to
// and including the final event. Whatever follows the final event is ignored.
func readStream(body io.Reader, emit func(api.ExecEvent) error) (adapters.ExitStatus, error) {
	sc := bufio.NewScanner(body)
	// +1 leaves room for the newline, so a line of exactly the limit is accepted.
	sc.Buffer(make([]byte, 0, 64<<10), api.MaxStreamLineBytes+1)
	for sc.Scan() {
		line := sc.Bytes()
		if len(line) == 0 {
			continue
		}
		var ev api.ExecEvent
		if err := json.Unmarshal(line, &ev); err != nil {
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
