package opensandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"net/url"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/adapters/httpx"
	"github.com/different-ai/differently/api"
)

// fileInfo is an entry of execd's directory listing. Mode is the octal permission
// written as a decimal number (644).
type fileInfo struct {
	Path       string `json:"path"`
	Type       string `json:"type"`
	Size       int64  `json:"size"`
	ModifiedAt string `json:"modified_at"`
	Mode       int64  `json:"mode"`
}

func checkPath(p string) error {
	if p == "" || strings.ContainsRune(p, 0) {
		return adapters.InvalidRequest("opensandbox: path %q is not valid", p)
	}
	return nil
}

// ReadFile downloads a file. One over api.MaxFileBytes is payload_too_large: the
// download is read one byte past the limit so it is never silently cut.
func (a *Adapter) ReadFile(ctx context.Context, ref, p string) ([]byte, error) {
	if err := checkPath(p); err != nil {
		return nil, err
	}
	c, err := a.execdFor(ctx, ref)
	if err != nil {
		return nil, err
	}
	req, err := c.NewRequest(ctx, http.MethodGet, "/files/download", url.Values{"path": {p}}, nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.Send(req)
	if err != nil {
		a.forgetOnOutage(ref, err)
		return nil, err
	}
	return c.ReadFileBody(resp, p)
}

func tooLarge(p string) error {
	return adapters.TooLarge("opensandbox: %s is larger than %d MiB, the most a file read returns", p, api.MaxFileBytes>>20)
}

// WriteFile creates the parent directories, then uploads the file (mode 0644).
func (a *Adapter) WriteFile(ctx context.Context, ref, p string, data []byte) error {
	if err := checkPath(p); err != nil {
		return err
	}
	if len(data) > api.MaxFileBytes {
		return tooLarge(p)
	}
	c, err := a.execdFor(ctx, ref)
	if err != nil {
		return err
	}
	if dir := path.Dir(p); dir != "." && dir != "/" {
		dirs := map[string]any{dir: map[string]int{"mode": 755}}
		if err := c.JSON(ctx, http.MethodPost, "/directories", nil, dirs, nil); err != nil {
			a.forgetOnOutage(ref, err)
			return err
		}
	}
	err = a.upload(ctx, c, p, data, 0o644)
	a.forgetOnOutage(ref, err)
	return err
}

// upload sends one file as execd expects: a metadata part (JSON, sent with a file
// name, which execd requires) followed by the file part.
func (a *Adapter) upload(ctx context.Context, c *httpx.Client, p string, data []byte, mode int) error {
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	meta, _ := json.Marshal(map[string]any{"path": p, "mode": octalDigits(mode)})
	h := textproto.MIMEHeader{}
	h.Set("Content-Disposition", `form-data; name="metadata"; filename="metadata"`)
	h.Set("Content-Type", "application/json")
	w, err := mw.CreatePart(h)
	if err != nil {
		return err
	}
	_, _ = w.Write(meta)
	fw, err := mw.CreateFormFile("file", path.Base(p))
	if err != nil {
		return err
	}
	_, _ = fw.Write(data)
	if err := mw.Close(); err != nil {
		return err
	}
	req, err := c.NewRequest(ctx, http.MethodPost, "/files/upload", nil, &body)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", mw.FormDataContentType())
	resp, err := c.Send(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, httpx.MaxErrorBody))
	return resp.Body.Close()
}

// cleanup removes a staged file that a command never got to read. Best effort.
func (a *Adapter) cleanup(ctx context.Context, c *httpx.Client, p string) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_ = c.JSON(cctx, http.MethodDelete, "/files", url.Values{"path": {p}}, nil, nil)
}

// ListFiles lists a directory's immediate entries with execd's directories/list.
func (a *Adapter) ListFiles(ctx context.Context, ref, p string) ([]adapters.FileInfo, error) {
	if err := checkPath(p); err != nil {
		return nil, err
	}
	var entries []fileInfo
	if err := a.execdJSON(ctx, ref, http.MethodGet, "/directories/list", url.Values{"path": {p}, "depth": {"1"}}, nil, &entries); err != nil {
		return nil, err
	}
	out := make([]adapters.FileInfo, 0, len(entries))
	for _, e := range entries {
		fi := adapters.FileInfo{Name: path.Base(e.Path), Path: e.Path, Size: e.Size, IsDir: e.Type == "directory"}
		if m, err := strconv.ParseUint(strconv.FormatInt(e.Mode, 10), 8, 32); err == nil {
			fi.Mode = uint32(m)
		}
		if t, err := time.Parse(time.RFC3339Nano, e.ModifiedAt); err == nil {
			fi.ModTime = t
		}
		out = append(out, fi)
	}
	return out, nil
}

// octalDigits writes a mode the way execd reads it: 0o644 becomes 644.
func octalDigits(mode int) int {
	n, _ := strconv.Atoi(strconv.FormatInt(int64(mode), 8))
	return n
}
