package httpapi

import (
	"bytes"
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
	if err := s.sendFile(w, bytes.NewReader(data)); err != nil {
		// The client stopped taking the file: end the connection, and with it the
		// slot.
		panic(http.ErrAbortHandler)
	}
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
	src := io.Reader(bytes.NewReader(first[:n]))
	if err == nil { // the file goes on past its first piece
		src = io.MultiReader(src, f)
	}
	if err := s.sendFile(w, src); err != nil {
		if _, ok := errors.AsType[*sendError](err); !ok && r.Context().Err() == nil {
			s.log.Warn("file download broke off", "path", r.URL.Path, "error", err)
		}
		panic(http.ErrAbortHandler)
	}
}

// DefaultTransferStallTimeout is how long a download may wait for its client to take
// the next piece of it, and an upload for the next bytes of its body.
const DefaultTransferStallTimeout = 30 * time.Second

// sendError is a download that failed on the client's side: it took nothing for the
// stall timeout, or the connection is gone.
type sendError struct{ err error }

func (e *sendError) Error() string { return "sending the file: " + e.err.Error() }
func (e *sendError) Unwrap() error { return e.err }

// sendPiece is how much of a file goes to the client under one write deadline.
const sendPiece = 32 << 10

// sendFile copies src to the answer, each piece under a write deadline of the stall
// timeout. The server has no write timeout (it would cut streamed execs), so
// without one a client that reads the status line and then nothing would block the
// write for ever, and hold its transfer slot, the adapter's reader and the
// connection with it. The deadline is moved with every piece: a slow client that
// keeps reading is not cut, however long the file takes. On success the deadline is
// lifted, since net/http keeps it for the connection's next request. A failure to
// read src is returned as it is, a failure to write as a *sendError.
func (s *Server) sendFile(w http.ResponseWriter, src io.Reader) error {
	rc := http.NewResponseController(w)
	buf := make([]byte, sendPiece)
	for {
		n, rerr := src.Read(buf)
		if n > 0 {
			// An error is http.ErrNotSupported, from a writer that is no
			// connection (a test's recorder): it cannot stall.
			_ = rc.SetWriteDeadline(time.Now().Add(s.stallTimeout))
			if _, err := w.Write(buf[:n]); err != nil {
				return &sendError{err: err}
			}
		}
		if errors.Is(rerr, io.EOF) {
			break
		}
		if rerr != nil {
			return rerr
		}
	}
	// What net/http still buffers goes out under the deadline too.
	_ = rc.SetWriteDeadline(time.Now().Add(s.stallTimeout))
	if err := rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return &sendError{err: err}
	}
	_ = rc.SetWriteDeadline(time.Time{})
	return nil
}

// DefaultUploadReadTimeout is how long a file upload's body may take to arrive: 100
// MiB at about 170 KiB/s. Within it, the body may go no longer than the stall
// timeout without bringing a byte.
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
		closeAfterAnswer(w)
		s.writeError(w, r, err)
		return
	}
	defer release()
	// limitBody capped the reader at api.MaxFileBytes.
	if st, ok := fs.(adapters.FileStreamer); ok {
		// The body goes to the adapter as it arrives: a 100 MiB upload takes a
		// buffer's worth of the daemon's memory, not 100 MiB.
		src := body.NewStream(w, r.Body, s.uploadTimeout)
		src.SetStall(s.stallTimeout)
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
	data, err := body.ReadAllWithinStall(w, r.Body, r.ContentLength, s.uploadTimeout, s.stallTimeout)
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
