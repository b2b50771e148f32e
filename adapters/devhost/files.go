package devhost

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/api"
)

// cleanPath checks a sandbox path and returns its cleaned form, relative to the
// sandbox's file tree fsDir. Paths are relative to the tree, or absolute inside it:
// the tree is its commands' HOME and working directory, so a path a command prints
// works here too. Anything that could name a place outside it lexically is refused
// here, and os.Root refuses what symlinks would reach. allowRoot admits "" and "."
// (the tree itself), which only listings and cwd need.
func cleanPath(fsDir, p string, allowRoot bool) (string, error) {
	if strings.ContainsRune(p, 0) {
		return "", adapters.InvalidRequest("devhost: path contains a NUL byte")
	}
	if p == "" {
		if allowRoot {
			return ".", nil
		}
		return "", adapters.InvalidRequest("devhost: path is empty")
	}
	if filepath.IsAbs(p) || strings.HasPrefix(p, "/") {
		rel, err := filepath.Rel(filepath.Clean(fsDir), filepath.Clean(p))
		if fsDir == "" || err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
			return "", adapters.InvalidRequest("devhost: path %q must be relative to the sandbox directory or inside it", p)
		}
		p = rel
	}
	c := filepath.Clean(p)
	if c == ".." || strings.HasPrefix(c, "../") {
		return "", adapters.InvalidRequest("devhost: path %q leaves the sandbox directory", p)
	}
	if c == "." && !allowRoot {
		return "", adapters.InvalidRequest("devhost: path %q names the sandbox directory, not a file", p)
	}
	return c, nil
}

// errEscapeText is how os.Root words a path that leaves the root; the sentinel
// itself is unexported.
const errEscapeText = "path escapes from parent"

// isEscape finds os.Root's escape error anywhere in err's chain; some Root methods
// wrap it in a PathError and some return it bare.
func isEscape(err error) bool {
	for ; err != nil; err = errors.Unwrap(err) {
		if err.Error() == errEscapeText {
			return true
		}
	}
	return false
}

// fsError maps a file operation's failure to the contract's codes. Everything the
// caller's path causes is invalid_request (it cannot succeed as written); only a
// missing file is not_found.
func fsError(op, p string, err error) error {
	if isEscape(err) {
		return adapters.InvalidRequest("devhost: %s %q: path leaves the sandbox directory", op, p)
	}
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return adapters.NotFound("devhost: %s %q: no such file or directory", op, p)
	case errors.Is(err, fs.ErrPermission), errors.Is(err, syscall.ENOTDIR), errors.Is(err, syscall.EISDIR),
		errors.Is(err, syscall.ELOOP), errors.Is(err, syscall.ENAMETOOLONG), errors.Is(err, fs.ErrExist),
		errors.Is(err, syscall.ENOTEMPTY), errors.Is(err, syscall.EINVAL):
		return adapters.InvalidRequest("devhost: %s %q: %s", op, p, unwrapMsg(err))
	}
	return internalError("%s %q: %s", op, p, unwrapMsg(err))
}

// openTree opens the sandbox's file tree as an os.Root. Files stay reachable while
// the instance is stopped: its disk persists.
func (a *Adapter) openTree(ref string) (*os.Root, error) {
	if _, err := a.loadMeta(ref); err != nil {
		return nil, err
	}
	r, err := os.OpenRoot(a.fsDir(ref))
	if err != nil {
		if _, merr := a.loadMeta(ref); merr != nil {
			return nil, merr // deleted meanwhile
		}
		// A record without its tree: this one sandbox is broken.
		return nil, adapters.SandboxFailed("devhost: open sandbox directory: %v", err)
	}
	return r, nil
}

// ReadFile implements adapters.FileSystem.
func (a *Adapter) ReadFile(ctx context.Context, ref, p string) (_ []byte, err error) {
	defer a.rename(&err)
	f, size, err := a.OpenFile(ctx, ref, p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var buf bytes.Buffer
	buf.Grow(int(size))
	if _, err := buf.ReadFrom(f); err != nil {
		if api.AsError(err) != nil {
			return nil, err
		}
		return nil, fsError("read", p, err)
	}
	return buf.Bytes(), nil
}

// OpenFile implements adapters.FileStreamer. The reader fails, rather than ends,
// should the file grow past api.MaxFileBytes while it is read.
func (a *Adapter) OpenFile(_ context.Context, ref, p string) (_ io.ReadCloser, _ int64, err error) {
	defer a.rename(&err)
	rel, err := cleanPath(a.fsDir(ref), p, false)
	if err != nil {
		return nil, 0, err
	}
	r, err := a.openTree(ref)
	if err != nil {
		return nil, 0, err
	}
	defer r.Close() // an open file outlives its Root
	// O_NONBLOCK so that a FIFO the sandbox planted cannot hang the open; it is then
	// refused as not regular.
	f, err := r.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, 0, fsError("read", p, err)
	}
	fi, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return nil, 0, fsError("read", p, err)
	}
	switch {
	case fi.IsDir():
		err = adapters.InvalidRequest("devhost: read %q: is a directory", p)
	case !fi.Mode().IsRegular():
		err = adapters.InvalidRequest("devhost: read %q: not a regular file", p)
	case fi.Size() > api.MaxFileBytes:
		err = adapters.TooLarge("devhost: read %q: %d bytes is over the limit of %d", p, fi.Size(), api.MaxFileBytes)
	}
	if err != nil {
		_ = f.Close()
		return nil, 0, err
	}
	return adapters.CapFile(f, "devhost: read "+strconv.Quote(p)), fi.Size(), nil
}

// WriteFile implements adapters.FileSystem.
func (a *Adapter) WriteFile(ctx context.Context, ref, p string, data []byte) (err error) {
	defer a.rename(&err)
	if len(data) > api.MaxFileBytes {
		return adapters.TooLarge("devhost: write %q: %d bytes is over the limit of %d", p, len(data), api.MaxFileBytes)
	}
	return a.WriteFileFrom(ctx, ref, p, bytes.NewReader(data))
}

// readError marks a failure of the caller's reader, which WriteFileFrom returns as
// it is (wrapped) rather than as a failure of the sandbox's filesystem.
type readError struct{ err error }

func (e *readError) Error() string { return e.err.Error() }
func (e *readError) Unwrap() error { return e.err }

type sourceReader struct{ r io.Reader }

func (s sourceReader) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if err != nil && !errors.Is(err, io.EOF) {
		err = &readError{err}
	}
	return n, err
}

// WriteFileFrom implements adapters.FileStreamer. The content goes to a temporary
// file that is renamed over the target once all of it has come, so readers never see
// a partial file and a failed upload leaves the old file (or none) in place.
func (a *Adapter) WriteFileFrom(_ context.Context, ref, p string, content io.Reader) (err error) {
	defer a.rename(&err)
	rel, err := cleanPath(a.fsDir(ref), p, false)
	if err != nil {
		return err
	}
	r, err := a.openTree(ref)
	if err != nil {
		return err
	}
	defer r.Close()
	dir := filepath.Dir(rel)
	if dir != "." {
		if err := r.MkdirAll(dir, 0o755); err != nil {
			return fsError("write", p, err)
		}
	}
	tmp := filepath.Join(dir, ".devhost-write-"+randomSuffix())
	f, err := r.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return fsError("write", p, err)
	}
	// One byte over the limit is enough to tell an oversized upload.
	n, err := io.Copy(f, io.LimitReader(sourceReader{content}, api.MaxFileBytes+1))
	if err == nil && n > api.MaxFileBytes {
		err = adapters.TooLarge("devhost: write %q: over the limit of %d bytes", p, api.MaxFileBytes)
	}
	if err == nil {
		err = f.Chmod(0o644) // the umask must not decide
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = r.Rename(tmp, rel)
	}
	if err != nil {
		_ = r.Remove(tmp)
		if re, ok := errors.AsType[*readError](err); ok {
			return fmt.Errorf("devhost: write %q: reading the content: %w", p, re.err)
		}
		if api.AsError(err) != nil {
			return err
		}
		return fsError("write", p, err)
	}
	return nil
}

// ListFiles implements adapters.FileSystem. Entries are described as they are
// (symlinks as links, not their targets) and Mode holds permission bits only.
func (a *Adapter) ListFiles(_ context.Context, ref, p string) (_ []adapters.FileInfo, err error) {
	defer a.rename(&err)
	rel, err := cleanPath(a.fsDir(ref), p, true)
	if err != nil {
		return nil, err
	}
	r, err := a.openTree(ref)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	// O_DIRECTORY refuses anything else up front; O_NONBLOCK is belt and braces
	// against a FIFO, whose plain open would block.
	d, err := r.OpenFile(rel, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, fsError("list", p, err)
	}
	defer d.Close()
	fi, err := d.Stat()
	if err != nil {
		return nil, fsError("list", p, err)
	}
	if !fi.IsDir() {
		return nil, adapters.InvalidRequest("devhost: list %q: not a directory", p)
	}
	entries, err := d.ReadDir(-1)
	if err != nil {
		return nil, fsError("list", p, err)
	}
	// File.ReadDir returns directory order; callers want a stable one.
	slices.SortFunc(entries, func(x, y fs.DirEntry) int { return strings.Compare(x.Name(), y.Name()) })
	out := make([]adapters.FileInfo, 0, len(entries))
	for _, e := range entries {
		info, err := e.Info()
		if errors.Is(err, fs.ErrNotExist) {
			continue // removed since the directory was read
		}
		if err != nil {
			return nil, fsError("list", p, err)
		}
		out = append(out, adapters.FileInfo{
			Name:    e.Name(),
			Path:    path.Join(filepath.ToSlash(rel), e.Name()),
			Size:    info.Size(),
			IsDir:   info.IsDir(),
			Mode:    uint32(info.Mode().Perm()),
			ModTime: info.ModTime().UTC(),
		})
	}
	return out, nil
}
