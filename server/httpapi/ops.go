package httpapi

import (
	"net/http"

	"github.com/different-ai/differently/server/lifecycle"
)

// runLifecycle answers a stop, start, pause or resume: the service's Operate.
func (s *Server) runLifecycle(w http.ResponseWriter, r *http.Request, id string, op lifecycle.Op) {
	ctx := r.Context()
	out, err := s.svc.Operate(ctx, callerOf(ctx), id, op)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, s.toSandbox(out))
}

func (s *Server) StopSandbox(w http.ResponseWriter, r *http.Request, id SandboxID) {
	s.runLifecycle(w, r, id, lifecycle.OpStop)
}

func (s *Server) StartSandbox(w http.ResponseWriter, r *http.Request, id SandboxID) {
	s.runLifecycle(w, r, id, lifecycle.OpStart)
}

func (s *Server) PauseSandbox(w http.ResponseWriter, r *http.Request, id SandboxID) {
	s.runLifecycle(w, r, id, lifecycle.OpPause)
}

func (s *Server) ResumeSandbox(w http.ResponseWriter, r *http.Request, id SandboxID) {
	s.runLifecycle(w, r, id, lifecycle.OpResume)
}

func (s *Server) ExposeSandboxPort(w http.ResponseWriter, r *http.Request, id SandboxID) {
	var body PortRequest
	if err := decodeJSON(r, &body, false); err != nil {
		s.writeError(w, r, err)
		return
	}
	ctx := r.Context()
	url, err := s.svc.ExposePort(ctx, callerOf(ctx), id, body.Port)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, PortResponse{Url: url})
}
