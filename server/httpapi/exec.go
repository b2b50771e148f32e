package httpapi

import (
	"mime"
	"net/http"
	"strconv"
	"strings"

	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/internal/frames"
	"github.com/different-ai/differently/internal/ndjson"
	"github.com/different-ai/differently/server/apierr"
	"github.com/different-ai/differently/server/sandboxes"
)

func (s *Server) ExecSandbox(w http.ResponseWriter, r *http.Request, id SandboxID, params ExecSandboxParams) {
	// The generated binding takes any string; the document allows four. Another value
	// (stream=yes, stream=TRUE) is refused rather than read as buffered, which the
	// client did not ask for.
	stream := false
	if params.Stream != nil {
		switch *params.Stream {
		case N1, True:
			stream = true
		case N0, False:
		default:
			s.writeError(w, r, apierr.Invalid("query parameter stream must be 0, 1, true or false, not %q", printable(string(*params.Stream))).
				WithDetail("parameter", "stream"))
			return
		}
	}
	var req api.ExecRequest
	if err := decodeAnyJSON(r, &req, false); err != nil {
		s.writeError(w, r, err)
		return
	}
	ctx := r.Context()
	cmd, err := s.svc.Command(ctx, callerOf(ctx), id, req)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if stream {
		s.streamExec(w, r, id, cmd)
		return
	}
	// The request context is the adapter's: a client that hangs up cancels the command.
	res, err := cmd.Run(ctx)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// streamExec answers NDJSON, one event per line, flushed as produced, ending with
// exactly one final event; or, when the client accepts it, the same events as frames
// (package frames). A pool without exec.stream gets the service's buffered
// fallback: one stdout and one stderr event, then the exit.
func (s *Server) streamExec(w http.ResponseWriter, r *http.Request, id string, cmd *sandboxes.Command) {
	nw := ndjson.NewExecWriter(w)
	if acceptsFrames(r.Header.Values("Accept")) {
		nw = ndjson.NewFramedExecWriter(w)
	}
	writeErr := func(w http.ResponseWriter, err error) { s.writeError(w, r, err) }
	// After output the status line is gone: the final event carries the code the
	// error envelope would have.
	describe := func(err error) (string, api.Code) {
		err = requestCause(r, err)
		e, internal := publicError(err)
		switch {
		case clientGone(r, err):
			// The client hung up: nobody reads the final event, and nothing failed
			// but the connection, which is the client's to close.
			s.log.Debug("streamed exec ended: the client disconnected", "path", r.URL.Path, "error", err)
		case internal:
			s.log.Error("streamed exec failed", "path", r.URL.Path, "error", err)
		}
		return e.Message, e.Code
	}
	defer func() {
		if p := recover(); p != nil {
			if p == http.ErrAbortHandler {
				panic(p)
			}
			s.log.Error("panic in streamed exec", "sandbox", id, "panic", p)
			nw.Finish(api.ExecEvent{}, api.Errorf(api.CodeInternal, "panic"), writeErr, describe)
		}
	}()
	final, err := cmd.Stream(r.Context(), nw)
	nw.Finish(final, err, writeErr, describe)
}

// acceptsFrames reports whether an Accept header names frames.ContentType with a
// quality above zero and no lower than any it gives NDJSON. Without it the answer is
// NDJSON, as it was before frames existed.
func acceptsFrames(accept []string) bool {
	framesQ, ndjsonQ := -1.0, -1.0
	for _, v := range accept {
		for item := range strings.SplitSeq(v, ",") {
			mt, params, err := mime.ParseMediaType(item)
			if err != nil {
				continue
			}
			q := 1.0
			if qs, ok := params["q"]; ok {
				if q, err = strconv.ParseFloat(qs, 64); err != nil {
					continue
				}
			}
			switch mt {
			case frames.ContentType:
				framesQ = max(framesQ, q)
			case ndjson.ContentType:
				ndjsonQ = max(ndjsonQ, q)
			}
		}
	}
	return framesQ > 0 && framesQ >= ndjsonQ
}
