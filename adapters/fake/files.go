package fake

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/api"
)

// cleanPath maps a guest path to its key. ".." is refused rather than resolved:
// adapters with a real filesystem must refuse it, and the fake should fail the same
// requests they do.
func cleanPath(p string) (string, error) {
	if strings.ContainsRune(p, 0) {
		return "", adapters.InvalidRequest("fake: path contains a NUL byte")
	}
	if slices.Contains(strings.Split(p, "/"), "..") {
		return "", adapters.InvalidRequest("fake: path %q contains ..", p)
	}
	return path.Clean("/" + p), nil
}

func dirPrefix(p string) string {
	if p == "/" {
		return p
	}
	return p + "/"
}

// isDirLocked reports whether some file lives under p: directories exist only
// through their files.
func isDirLocked(files map[string]file, p string) bool {
	prefix := dirPrefix(p)
	for k := range files {
		if strings.HasPrefix(k, prefix) {
			return true
		}
	}
	return false
}

func copyFiles(src map[string]file) map[string]file {
	out := make(map[string]file, len(src))
	for k, f := range src {
		out[k] = file{data: slices.Clone(f.data), modTime: f.modTime}
	}
	return out
}

func (a *Adapter) ReadFile(_ context.Context, ref, p string) ([]byte, error) {
	if err := a.require("files", adapters.FeatureFiles); err != nil {
		return nil, err
	}
	key, err := cleanPath(p)
	if err != nil {
		return nil, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	in, err := a.runningLocked(ref, "read file")
	if err != nil {
		return nil, err
	}
	f, ok := in.files[key]
	switch {
	case ok && len(f.data) > api.MaxFileBytes:
		return nil, adapters.TooLarge("fake: %s is over %d bytes", key, api.MaxFileBytes)
	case ok:
		return slices.Clone(f.data), nil
	case key == "/" || isDirLocked(in.files, key):
		return nil, adapters.InvalidRequest("fake: %s is a directory", key)
	}
	return nil, adapters.NotFound("fake: %s does not exist", key)
}

func (a *Adapter) WriteFile(_ context.Context, ref, p string, data []byte) error {
	if err := a.require("files", adapters.FeatureFiles); err != nil {
		return err
	}
	if len(data) > api.MaxFileBytes {
		return adapters.TooLarge("fake: %d bytes is over the limit of %d", len(data), api.MaxFileBytes)
	}
	key, err := cleanPath(p)
	if err != nil {
		return err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	in, err := a.runningLocked(ref, "write file")
	if err != nil {
		return err
	}
	if key == "/" || isDirLocked(in.files, key) {
		return adapters.InvalidRequest("fake: %s is a directory", key)
	}
	for dir := path.Dir(key); dir != "/"; dir = path.Dir(dir) {
		if _, ok := in.files[dir]; ok {
			return adapters.InvalidRequest("fake: %s is a file, not a directory", dir)
		}
	}
	in.files[key] = file{data: slices.Clone(data), modTime: time.Now()}
	return nil
}

func (a *Adapter) ListFiles(_ context.Context, ref, p string) ([]adapters.FileInfo, error) {
	if err := a.require("files", adapters.FeatureFiles); err != nil {
		return nil, err
	}
	key, err := cleanPath(p)
	if err != nil {
		return nil, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	in, err := a.runningLocked(ref, "list files")
	if err != nil {
		return nil, err
	}
	if _, ok := in.files[key]; ok {
		return nil, adapters.InvalidRequest("fake: %s is a file, not a directory", key)
	}
	prefix := dirPrefix(key)
	seen := map[string]bool{}
	out := []adapters.FileInfo{}
	for k, f := range in.files {
		rest, ok := strings.CutPrefix(k, prefix)
		if !ok {
			continue
		}
		name, _, nested := strings.Cut(rest, "/")
		if seen[name] {
			continue
		}
		seen[name] = true
		info := adapters.FileInfo{Name: name, Path: prefix + name}
		if nested {
			info.IsDir, info.Mode = true, 0o755
		} else {
			info.Size, info.Mode, info.ModTime = int64(len(f.data)), 0o644, f.modTime
		}
		out = append(out, info)
	}
	if len(out) == 0 && key != "/" {
		return nil, adapters.NotFound("fake: directory %s does not exist", key)
	}
	slices.SortFunc(out, func(x, y adapters.FileInfo) int { return strings.Compare(x.Name, y.Name) })
	return out, nil
}

// WriteFileFrom implements adapters.FileStreamer. The fake keeps files in memory
// anyway, so it reads the content whole; a failed read writes nothing.
func (a *Adapter) WriteFileFrom(ctx context.Context, ref, p string, content io.Reader) error {
	if err := a.require("files", adapters.FeatureFiles); err != nil {
		return err
	}
	data, err := adapters.ReadCapped(content, "fake: file content")
	if err != nil {
		if api.AsError(err) != nil {
			return err
		}
		return fmt.Errorf("fake: write %s: reading the content: %w", p, err)
	}
	return a.WriteFile(ctx, ref, p, data)
}

// OpenFile implements adapters.FileStreamer over a copy of the file.
func (a *Adapter) OpenFile(ctx context.Context, ref, p string) (io.ReadCloser, int64, error) {
	data, err := a.ReadFile(ctx, ref, p)
	if err != nil {
		return nil, 0, err
	}
	return io.NopCloser(bytes.NewReader(data)), int64(len(data)), nil
}
