package httpapi

import (
	"encoding/json"
	"errors"
	"net/http"
	"sync"
	"unicode/utf8"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/server/store"
)

// maxEventData bounds the data of one streamed event. JSON escaping can grow a byte to
// six (\u00XX), so 1 MiB of data always encodes to a line under api.MaxStreamLineBytes.
const maxEventData = 1 << 20

var errStreamClosed = errors.New("httpapi: emit called after the stream ended")

func (s *Server) ExecSandbox(w http.ResponseWriter, r *http.Request, id SandboxID, params ExecSandboxParams) {
	var req api.ExecRequest
	if err := decodeJSON(r, &req, false); err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := req.Validate(); err != nil {
		s.writeError(w, r, err)
		return
	}
	ctx := r.Context()
	// Exec is part of the required interface: no feature to check.
	t, err := s.operate(ctx, id, "exec", "", store.StateRunning)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if st := deref(params.Stream); st == N1 || st == True {
		s.streamExec(w, r, t, req)
		return
	}
	// The request context is the adapter's: a client that hangs up cancels the command.
	res, err := t.view.Adapter.Exec(ctx, t.sb.BackendRef, req)
	if err != nil {
		s.writeError(w, r, adapterError(err, "exec", t.view))
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// streamExec answers NDJSON, one event per line, flushed as produced, ending with
// exactly one final event. A pool without exec.stream gets adapters.ExecStream's
// buffered fallback: one stdout and one stderr event, then the exit.
func (s *Server) streamExec(w http.ResponseWriter, r *http.Request, t target, req api.ExecRequest) {
	nw := &ndjsonWriter{w: w, rc: http.NewResponseController(w)}
	defer func() {
		if p := recover(); p != nil {
			if p == http.ErrAbortHandler {
				panic(p)
			}
			s.log.Error("panic in streamed exec", "sandbox", t.sb.ID, "panic", p)
			nw.finish(s, r, api.ExecEvent{}, api.Errorf(api.CodeInternal, "panic"))
		}
	}()
	streaming := t.view.Supports(adapters.FeatureExecStream)
	final, err := adapters.ExecStream(r.Context(), t.view.Adapter, streaming, t.sb.BackendRef, req, nw.emit)
	nw.finish(s, r, final, adapterError(err, "exec", t.view))
}

// ndjsonWriter sends the 200 status only with the first line, so that an error before
// any output still reaches the client as an envelope with its status. Its mutex
// serialises emit against the final event, and keeps an adapter that emits after
// returning from writing to a finished answer.
type ndjsonWriter struct {
	w  http.ResponseWriter
	rc *http.ResponseController

	mu      sync.Mutex
	started bool
	closed  bool
}

func (n *ndjsonWriter) writeLocked(ev api.ExecEvent) error {
	line, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	if !n.started {
		n.started = true
		h := n.w.Header()
		h.Set("Content-Type", contentTypeNDJSON)
		h.Set("Cache-Control", "no-store")
		h.Set("X-Content-Type-Options", "nosniff")
		n.w.WriteHeader(http.StatusOK)
	}
	if _, err := n.w.Write(append(line, '\n')); err != nil {
		return err
	}
	// Without a flush output would sit in the server's buffer and arrive in bursts.
	if err := n.rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	return nil
}

// emit forwards output events in pieces of at most maxEventData. Only Stream and Data
// are copied, so an adapter cannot end the stream with a final event of its own.
func (n *ndjsonWriter) emit(ev api.ExecEvent) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return errStreamClosed
	}
	data := ev.Data
	for len(data) > 0 {
		k := min(len(data), maxEventData)
		// Cut on a rune boundary: json.Marshal would replace half a character with
		// U+FFFD on both sides of the cut.
		for k < len(data) && k > maxEventData-utf8.UTFMax && !utf8.RuneStart(data[k]) {
			k--
		}
		if err := n.writeLocked(api.ExecEvent{Stream: ev.Stream, Data: data[:k]}); err != nil {
			return err
		}
		data = data[k:]
	}
	return nil
}

// finish sends the final event, or before the stream started the error envelope.
func (n *ndjsonWriter) finish(s *Server, r *http.Request, final api.ExecEvent, err error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.closed = true
	switch {
	case err == nil:
		_ = n.writeLocked(final)
	case !n.started:
		s.writeError(n.w, r, err)
	default:
		e, internal := publicError(err)
		if internal {
			s.log.Error("streamed exec failed", "path", r.URL.Path, "error", err)
		}
		_ = n.writeLocked(api.ExecEvent{Error: e.Message})
	}
}
