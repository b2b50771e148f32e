package freestyle

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strings"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/api"
)

// FileMode is the mode of every file written through the adapter: sandbox files
// may hold secrets, and the env file does.
const FileMode = "0600"

// cleanPath checks a sandbox path and makes it absolute: Freestyle's fs endpoints
// take absolute paths, and a relative one is taken from "/".
func cleanPath(p string) (string, error) {
	if p == "" || strings.ContainsRune(p, 0) {
		return "", adapters.InvalidRequest("freestyle: path %q is not valid", p)
	}
	if slices.Contains(strings.Split(p, "/"), "..") {
		return "", adapters.InvalidRequest("freestyle: path %q has a .. element", p)
	}
	return path.Clean("/" + p), nil
}

// ReadFile reads a file through fs/read. A file over api.MaxFileBytes is
// payload_too_large; it is detected while reading, never cut silently.
func (a *Adapter) ReadFile(ctx context.Context, ref, p string) ([]byte, error) {
	clean, err := cleanPath(p)
	if err != nil {
		return nil, err
	}
	if err := a.requireRunning(ctx, ref); err != nil {
		return nil, err
	}
	req, err := a.c.NewRequest(ctx, http.MethodGet, vmPath(ref, "fs", "read"), url.Values{"path": {clean}}, nil)
	if err != nil {
		return nil, err
	}
	resp, err := a.c.Send(req)
	if err != nil {
		return nil, err
	}
	return a.c.ReadFileBody(resp, clean)
}

// WriteFile creates the parent directories with fs/mkdir, then writes the file
// with mode 0600 through fs/write.
func (a *Adapter) WriteFile(ctx context.Context, ref, p string, data []byte) error {
	clean, err := cleanPath(p)
	if err != nil {
		return err
	}
	if len(data) > api.MaxFileBytes {
		return adapters.TooLarge("freestyle: %d bytes is over the %d MiB file limit", len(data), api.MaxFileBytes>>20)
	}
	if err := a.requireRunning(ctx, ref); err != nil {
		return err
	}
	return a.writeFile(ctx, ref, clean, data)
}

// writeFile writes without the state check; Create uses it while it owns the VM.
func (a *Adapter) writeFile(ctx context.Context, ref, clean string, data []byte) error {
	if dir := path.Dir(clean); dir != "/" {
		if err := a.c.JSON(ctx, http.MethodPost, vmPath(ref, "fs", "mkdir"), nil, map[string]string{"path": dir}, nil); err != nil {
			return err
		}
	}
	req, err := a.c.NewRequest(ctx, http.MethodPut, vmPath(ref, "fs", "write"), url.Values{"path": {clean}, "mode": {FileMode}}, bytes.NewReader(data))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/octet-stream")
	resp, err := a.c.Send(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	return resp.Body.Close()
}

type dirAnswer struct {
	Entries []struct {
		Name string `json:"name"`
		Kind string `json:"kind"`
	} `json:"entries"`
}

// ListFiles lists a directory through fs/dir. Freestyle gives names and kinds only,
// so sizes, modes and times are left zero.
func (a *Adapter) ListFiles(ctx context.Context, ref, p string) ([]adapters.FileInfo, error) {
	clean, err := cleanPath(p)
	if err != nil {
		return nil, err
	}
	if err := a.requireRunning(ctx, ref); err != nil {
		return nil, err
	}
	var dir dirAnswer
	if err := a.c.JSON(ctx, http.MethodGet, vmPath(ref, "fs", "dir"), url.Values{"path": {clean}}, nil, &dir); err != nil {
		return nil, err
	}
	out := make([]adapters.FileInfo, 0, len(dir.Entries))
	for _, e := range dir.Entries {
		out = append(out, adapters.FileInfo{
			Name:  e.Name,
			Path:  path.Join(clean, e.Name),
			IsDir: e.Kind == "dir" || e.Kind == "directory",
		})
	}
	return out, nil
}
