package envd

import (
	"encoding/json"
	"errors"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"path"
	"strconv"

	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/server/store"
)

// restError is envd's REST error body.
type restError struct {
	Message string `json:"message"`
	Code    int    `json:"code"`
}

func (h *Handler) writeError(w http.ResponseWriter, r *http.Request, err error) {
	status := http.StatusInternalServerError
	msg := err.Error()
	if e := api.AsError(err); e != nil {
		status, msg = e.HTTPStatus(), api.Message(err)
	} else {
		h.log.Error("envd request failed", "path", r.URL.Path, "error", err)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(restError{Message: msg, Code: status})
}

// health answers 204 for a running sandbox and 502 for any other, unknown ones
// included: the SDK's isRunning reads only 502 as "not running" and anything else but
// 2xx as a failure. A wrong token for a sandbox that exists is such a failure.
func (h *Handler) health(w http.ResponseWriter, r *http.Request) {
	c, id, err := h.caller(r.Context(), r.Header)
	if err == nil {
		var sb store.Sandbox
		if sb, err = h.svc.Sandbox(r.Context(), c, id); err == nil && sb.State != store.StateRunning {
			err = api.Errorf(api.CodeInvalidState, "sandbox %s is %s", id, sb.State)
		}
	}
	switch {
	case err == nil:
		w.WriteHeader(http.StatusNoContent)
	case api.IsCode(err, api.CodeNotFound), api.IsCode(err, api.CodeInvalidState):
		w.WriteHeader(http.StatusBadGateway)
	default:
		h.writeError(w, r, err)
	}
}

// readFile is GET /files?path=: the file's bytes.
func (h *Handler) readFile(w http.ResponseWriter, r *http.Request) {
	c, id, err := h.caller(r.Context(), r.Header)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	p, err := h.resolve(r.Context(), c, id, r.URL.Query().Get("path"))
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	f, err := h.svc.ReadFile(r.Context(), c, id, p)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	defer f.Close()
	hdr := w.Header()
	hdr.Set("Content-Type", "application/octet-stream")
	hdr.Set("X-Content-Type-Options", "nosniff")
	hdr.Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": path.Base(p)}))
	if f.Size >= 0 {
		hdr.Set("Content-Length", strconv.FormatInt(f.Size, 10))
	}
	if _, err := io.Copy(w, f); err != nil {
		// The status line is gone: breaking the connection is what tells the
		// client the file is cut.
		h.log.Debug("envd file download broke off", "path", p, "error", err)
		panic(http.ErrAbortHandler)
	}
}

// uploadEntry is one uploaded file in POST /files' answer.
type uploadEntry struct {
	Name string `json:"name"`
	Path string `json:"path"`
	Type string `json:"type"`
}

// writeFiles is POST /files: a multipart form whose "file" parts are files (at path=,
// or at each part's file name when path= is absent), or, from envd 0.5.7's SDKs, an
// application/octet-stream body that is the file at path=.
func (h *Handler) writeFiles(w http.ResponseWriter, r *http.Request) {
	c, id, err := h.caller(r.Context(), r.Header)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	query := r.URL.Query().Get("path")
	var written []uploadEntry
	write := func(p string, body io.Reader) error {
		p, err := h.resolve(r.Context(), c, id, p)
		if err != nil {
			return err
		}
		if p == "" {
			return api.Errorf(api.CodeInvalidRequest, "a file path is required (query parameter path, or the part's file name)")
		}
		if err := h.svc.WriteFile(r.Context(), c, id, p, &content{r: body}); err != nil {
			return err
		}
		written = append(written, uploadEntry{Name: path.Base(p), Path: p, Type: "file"})
		return nil
	}
	mt, params, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	switch mt {
	case "multipart/form-data":
		mr := multipart.NewReader(r.Body, params["boundary"])
		for {
			part, err := mr.NextPart()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				h.writeError(w, r, api.Errorf(api.CodeInvalidRequest, "reading the multipart body: %v", err))
				return
			}
			if part.FormName() != "file" {
				continue
			}
			p := query
			if p == "" {
				// Part.FileName keeps only the last element; the SDK puts a path there.
				_, cd, _ := mime.ParseMediaType(part.Header.Get("Content-Disposition"))
				p = cd["filename"]
			}
			if err := write(p, part); err != nil {
				h.writeError(w, r, err)
				return
			}
		}
	case "application/octet-stream":
		if err := write(query, r.Body); err != nil {
			h.writeError(w, r, err)
			return
		}
	default:
		h.writeError(w, r, api.Errorf(api.CodeInvalidRequest, "the body must be multipart/form-data or application/octet-stream, not %q", mt))
		return
	}
	if len(written) == 0 {
		h.writeError(w, r, api.Errorf(api.CodeInvalidRequest, "the upload holds no file part"))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(written)
}

// content is one uploaded file for the service (sandboxes.Content), refused past
// api.MaxFileBytes as the native API refuses it.
type content struct {
	r    io.Reader
	read int64
	err  error
}

func (c *content) Size() int64 { return -1 }

func (c *content) Read(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	n, err := c.r.Read(p)
	c.read += int64(n)
	switch {
	case c.read > api.MaxFileBytes:
		c.err = api.Errorf(api.CodePayloadTooLarge, "file content is over %d bytes", api.MaxFileBytes)
		return 0, c.err
	case err != nil && !errors.Is(err, io.EOF):
		c.err = api.Errorf(api.CodeInvalidRequest, "reading the upload: %v", err)
		return n, c.err
	}
	return n, err
}

func (c *content) Stream() io.Reader { return c }

func (c *content) Done(bool) error { return c.err }

func (c *content) ReadAll() ([]byte, error) {
	data, err := io.ReadAll(c)
	if err != nil {
		return nil, err
	}
	return data, nil
}
