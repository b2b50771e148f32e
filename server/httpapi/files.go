package httpapi

import (
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/internal/body"
	"github.com/different-ai/differently/server/store"
)

// fileTarget loads a running sandbox whose pool serves files.
func (s *Server) fileTarget(r *http.Request, id, op, path string) (target, adapters.FileSystem, error) {
	if path == "" {
		return target{}, nil, invalid("the path query parameter is required")
	}
	t, err := s.operate(r.Context(), id, op, adapters.FeatureFiles, store.StateRunning)
	if err != nil {
		return target{}, nil, err
	}
	fs, err := optional[adapters.FileSystem](t, op)
	return t, fs, err
}

func (s *Server) ListSandboxFiles(w http.ResponseWriter, r *http.Request, id SandboxID, params ListSandboxFilesParams) {
	const op = "files.list"
	t, fs, err := s.fileTarget(r, id, op, params.Path)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	items, err := fs.ListFiles(r.Context(), t.sb.BackendRef, params.Path)
	if err != nil {
		s.writeError(w, r, adapterError(err, op, t.view))
		return
	}
	writeJSON(w, http.StatusOK, FileList{Items: nonNil(items)})
}

func (s *Server) ReadSandboxFile(w http.ResponseWriter, r *http.Request, id SandboxID, params ReadSandboxFileParams) {
	const op = "files.read"
	t, fs, err := s.fileTarget(r, id, op, params.Path)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	data, err := fs.ReadFile(r.Context(), t.sb.BackendRef, params.Path)
	if err != nil {
		s.writeError(w, r, adapterError(err, op, t.view))
		return
	}
	// The contract forbids a larger answer; refusing beats passing a cut file on.
	if len(data) > api.MaxFileBytes {
		s.writeError(w, r, api.Errorf(api.CodePayloadTooLarge, "file %s is over %d bytes", params.Path, api.MaxFileBytes))
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/octet-stream")
	h.Set("Content-Length", strconv.Itoa(len(data)))
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(data)
}

// DefaultUploadReadTimeout is how long a file upload's body may take to arrive: 100
// MiB at about 170 KiB/s.
const DefaultUploadReadTimeout = 10 * time.Minute

func (s *Server) WriteSandboxFile(w http.ResponseWriter, r *http.Request, id SandboxID, params WriteSandboxFileParams) {
	const op = "files.write"
	t, fs, err := s.fileTarget(r, id, op, params.Path)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	// limitBody capped the reader at api.MaxFileBytes.
	data, err := body.ReadAllWithin(w, r.Body, r.ContentLength, s.uploadTimeout)
	if err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			s.writeError(w, r, api.Errorf(api.CodePayloadTooLarge, "file content is over %d bytes", api.MaxFileBytes))
			return
		}
		s.writeError(w, r, invalid("reading the file content failed: %v", err))
		return
	}
	if err := fs.WriteFile(r.Context(), t.sb.BackendRef, params.Path, data); err != nil {
		s.writeError(w, r, adapterError(err, op, t.view))
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
