package httpapi

import (
	"errors"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/internal/body"
	"github.com/different-ai/differently/server/apierr"
	"github.com/different-ai/differently/server/sandboxes"
)

// pathParam checks the path query parameter a file route requires.
func pathParam(path string) error {
	if path == "" {
		return apierr.Invalid("the path query parameter is required")
	}
	return nil
}

func (s *Server) ListSandboxFiles(w http.ResponseWriter, r *http.Request, id SandboxID, params ListSandboxFilesParams) {
	if err := pathParam(params.Path); err != nil {
		s.writeError(w, r, err)
		return
	}
	ctx := r.Context()
	items, err := s.svc.ListFiles(ctx, callerOf(ctx), id, params.Path)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, FileList{Items: nonNil(items)})
}

// ReadSandboxFile answers with a file as the service reads it. Once the status is
// out, a failure can only break the connection: the client then sees a transfer
// that failed, never a file that ends early.
func (s *Server) ReadSandboxFile(w http.ResponseWriter, r *http.Request, id SandboxID, params ReadSandboxFileParams) {
	if err := pathParam(params.Path); err != nil {
		s.writeError(w, r, err)
		return
	}
	ctx := r.Context()
	f, err := s.svc.ReadFile(ctx, callerOf(ctx), id, params.Path)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	defer f.Close()
	fileHeaders(w, f.Size)
	w.WriteHeader(http.StatusOK)
	if err := s.sendFile(w, f); err != nil {
		if _, ok := errors.AsType[*sendError](err); !ok && ctx.Err() == nil {
			s.log.Warn("file download broke off", "path", r.URL.Path, "error", err)
		}
		// The client stopped taking the file, or the adapter stopped giving it: end
		// the connection, and with it the transfer's slot.
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
	if err := pathParam(params.Path); err != nil {
		s.writeError(w, r, err)
		return
	}
	ctx := r.Context()
	// limitBody capped the body at api.MaxFileBytes.
	err := s.svc.WriteFile(ctx, callerOf(ctx), id, params.Path, &upload{s: s, w: w, r: r})
	if errors.Is(err, sandboxes.ErrTransferLimit) {
		// The body is not read: the answer must not wait for it.
		closeAfterAnswer(w)
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// upload is a request body as the service takes a file's content
// (sandboxes.Content): read under the upload timeout, and failing when it brings no
// byte for the stall timeout.
type upload struct {
	s      *Server
	w      http.ResponseWriter
	r      *http.Request
	stream *body.Stream
}

func (u *upload) Size() int64 { return u.r.ContentLength }

func (u *upload) Stream() io.Reader {
	u.stream = body.NewStream(u.w, u.r.Body, u.s.uploadTimeout)
	u.stream.SetStall(u.s.stallTimeout)
	return u.stream
}

func (u *upload) Done(failed bool) error {
	u.stream.Done(failed)
	if err := u.stream.Err(); err != nil {
		return uploadError(err)
	}
	return nil
}

func (u *upload) ReadAll() ([]byte, error) {
	data, err := body.ReadAllWithinStall(u.w, u.r.Body, u.r.ContentLength, u.s.uploadTimeout, u.s.stallTimeout)
	if err != nil {
		return nil, uploadError(err)
	}
	return data, nil
}

// uploadError is the answer to a file body that could not be read: too long, or
// broken off or too slow (the client's doing, so invalid_request).
func uploadError(err error) error {
	if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
		return api.Errorf(api.CodePayloadTooLarge, "file content is over %d bytes", api.MaxFileBytes)
	}
	return apierr.Invalid("reading the file content failed: %v", err)
}
