package httpapi

import (
	"mime"
	"net/http"
	"strconv"
	"strings"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/internal/frames"
	"github.com/different-ai/differently/internal/ndjson"
	"github.com/different-ai/differently/server/store"
)

func (s *Server) ExecSandbox(w http.ResponseWriter, r *http.Request, id SandboxID, params ExecSandboxParams) {
	var req api.ExecRequest
	if err := decodeAnyJSON(r, &req, false); err != nil {
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
// exactly one final event; or, when the client accepts it, the same events as frames
// (package frames). A pool without exec.stream gets adapters.ExecStream's buffered
// fallback: one stdout and one stderr event, then the exit.
func (s *Server) streamExec(w http.ResponseWriter, r *http.Request, t target, req api.ExecRequest) {
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
		if internal {
			s.log.Error("streamed exec failed", "path", r.URL.Path, "error", err)
		}
		return e.Message, e.Code
	}
	defer func() {
		if p := recover(); p != nil {
			if p == http.ErrAbortHandler {
				panic(p)
			}
			s.log.Error("panic in streamed exec", "sandbox", t.sb.ID, "panic", p)
			nw.Finish(api.ExecEvent{}, api.Errorf(api.CodeInternal, "panic"), writeErr, describe)
		}
	}()
	streaming := t.view.Supports(adapters.FeatureExecStream)
	final, err := nw.Exec(r.Context(), t.view.Adapter, streaming, t.sb.BackendRef, req)
	nw.Finish(final, adapterError(err, "exec", t.view), writeErr, describe)
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
