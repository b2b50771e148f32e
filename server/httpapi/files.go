package httpapi

import (
	"errors"
	"io"
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

// transferSlot takes a slot of the large-transfer bound for t's project when a
// transfer of size bytes (negative: unknown) counts; release is never nil.
func (s *Server) transferSlot(t target, size int64) (release func(), err error) {
	if !s.transfers.counts(size) {
		return func() {}, nil
	}
	return s.transfers.acquire(t.sb.Org + "/" + t.sb.Project)
}

func (s *Server) ReadSandboxFile(w http.ResponseWriter, r *http.Request, id SandboxID, params ReadSandboxFileParams) {
	const op = "files.read"
	t, fs, err := s.fileTarget(r, id, op, params.Path)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if st, ok := fs.(adapters.FileStreamer); ok {
		s.streamFile(w, r, t, st, params.Path)
		return
	}
	// The adapter hands the file over whole, and its size is not known before.
	release, err := s.transferSlot(t, -1)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	defer release()
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
	fileHeaders(w, int64(len(data)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(data)
}

func fileHeaders(w http.ResponseWriter, size int64) {
	h := w.Header()
	h.Set("Content-Type", "application/octet-stream")
	if size >= 0 {
		h.Set("Content-Length", strconv.FormatInt(size, 10))
	}
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
}

// firstPiece is how much of a streamed download is read before the status goes out,
// so that an adapter failing at the start still gets an error answer.
const firstPiece = 32 << 10

// streamFile answers with a file as the adapter reads it. Once the status is out, a
// failure can only break the connection: the client then sees a transfer that
// failed, never a file that ends early.
func (s *Server) streamFile(w http.ResponseWriter, r *http.Request, t target, st adapters.FileStreamer, path string) {
	const op = "files.read"
	f, size, err := st.OpenFile(r.Context(), t.sb.BackendRef, path)
	if err != nil {
		s.writeError(w, r, adapterError(err, op, t.view))
		return
	}
	defer f.Close()
	if size > api.MaxFileBytes {
		s.writeError(w, r, api.Errorf(api.CodePayloadTooLarge, "file %s is over %d bytes", path, api.MaxFileBytes))
		return
	}
	release, err := s.transferSlot(t, size)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	defer release()
	first := make([]byte, firstPiece)
	n, err := io.ReadFull(f, first)
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
		s.writeError(w, r, adapterError(err, op, t.view))
		return
	}
	fileHeaders(w, size)
	w.WriteHeader(http.StatusOK)
	if _, werr := w.Write(first[:n]); werr != nil || err != nil {
		return // the client went away, or that was all of it
	}
	if _, err := io.Copy(w, f); err != nil {
		if r.Context().Err() == nil {
			s.log.Warn("file download broke off", "path", r.URL.Path, "error", err)
		}
		panic(http.ErrAbortHandler)
	}
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
	release, err := s.transferSlot(t, r.ContentLength)
	if err != nil {
		// The body is not read: the answer must not wait for it.
		w.Header().Set("Connection", "close")
		s.writeError(w, r, err)
		return
	}
	defer release()
	// limitBody capped the reader at api.MaxFileBytes.
	if st, ok := fs.(adapters.FileStreamer); ok {
		// The body goes to the adapter as it arrives: a 100 MiB upload takes a
		// buffer's worth of the daemon's memory, not 100 MiB.
		src := body.NewStream(w, r.Body, s.uploadTimeout)
		err := st.WriteFileFrom(r.Context(), t.sb.BackendRef, params.Path, src)
		src.Done(err != nil)
		if rerr := src.Err(); rerr != nil {
			s.writeError(w, r, uploadError(rerr))
			return
		}
		if err != nil {
			s.writeError(w, r, adapterError(err, op, t.view))
			return
		}
		w.WriteHeader(http.StatusNoContent)
		return
	}
	data, err := body.ReadAllWithin(w, r.Body, r.ContentLength, s.uploadTimeout)
	if err != nil {
		s.writeError(w, r, uploadError(err))
		return
	}
	if err := fs.WriteFile(r.Context(), t.sb.BackendRef, params.Path, data); err != nil {
		s.writeError(w, r, adapterError(err, op, t.view))
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// uploadError is the answer to a file body that could not be read: too long, or
// broken off or too slow (the client's doing, so invalid_request).
func uploadError(err error) error {
	if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
		return api.Errorf(api.CodePayloadTooLarge, "file content is over %d bytes", api.MaxFileBytes)
	}
	return invalid("reading the file content failed: %v", err)
}
