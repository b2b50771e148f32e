package envd

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"path"
	"strings"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/server/e2b/envd/gen/filesystempb"
	"github.com/different-ai/differently/server/sandboxes"
)

// shellTimeoutSeconds bounds the shell commands that stand in for the file operations
// the adapter contract lacks.
const shellTimeoutSeconds = 60

// maxListEntries bounds a deep ListDir's answer.
const maxListEntries = 100_000

// filesystemService is filesystem.Filesystem.
type filesystemService struct{ h *Handler }

// entryOf describes fi, listed in dir. Its path is dir's, as the caller named it,
// and its name: adapters differ in what FileInfo.Path is relative to (devhost's is
// its sandbox directory's), and the SDK wants the path it can use again.
func entryOf(fi adapters.FileInfo, dir string) *filesystempb.EntryInfo {
	p := path.Join(dir, fi.Name)
	mode := fs.FileMode(fi.Mode).Perm()
	typ := filesystempb.FileType_FILE_TYPE_FILE
	if fi.IsDir {
		mode |= fs.ModeDir
		typ = filesystempb.FileType_FILE_TYPE_DIRECTORY
	}
	e := &filesystempb.EntryInfo{Name: fi.Name, Type: typ, Path: p, Size: fi.Size, Mode: fi.Mode, Permissions: mode.String()}
	if !fi.ModTime.IsZero() {
		e.ModifiedTime = timestamppb.New(fi.ModTime)
	}
	return e
}

func notFound(p string) error {
	return connect.NewError(connect.CodeNotFound, fmt.Errorf("path %s not found", p))
}

// stat finds p through a listing of its parent: the contract has no stat of its own.
func (h *Handler) stat(ctx context.Context, c sandboxes.Caller, id, p string) (*filesystempb.EntryInfo, error) {
	if p == "" {
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("a path is required"))
	}
	clean := path.Clean(p)
	if clean == "/" || clean == "." {
		// The top has no parent to list it; that it lists makes it a directory.
		if _, err := h.svc.ListFiles(ctx, c, id, p); err != nil {
			return nil, connectError(err)
		}
		return &filesystempb.EntryInfo{Name: clean, Type: filesystempb.FileType_FILE_TYPE_DIRECTORY, Path: clean}, nil
	}
	dir, name := path.Split(clean)
	if dir == "" {
		dir = "."
	}
	items, err := h.svc.ListFiles(ctx, c, id, dir)
	if err != nil {
		if api.IsCode(err, api.CodeNotFound) {
			return nil, notFound(p)
		}
		return nil, connectError(err)
	}
	for _, fi := range items {
		if fi.Name == name {
			return entryOf(fi, strings.TrimSuffix(dir, "/")), nil
		}
	}
	return nil, notFound(p)
}

// target is the caller of a Connect request, its sandbox and p resolved in it, with
// errors as Connect's.
func (h *Handler) target(ctx context.Context, hdr http.Header, p string) (sandboxes.Caller, string, string, error) {
	c, id, err := h.caller(ctx, hdr)
	if err != nil {
		return sandboxes.Caller{}, "", "", connectError(err)
	}
	if p, err = h.resolve(ctx, c, id, p); err != nil {
		return sandboxes.Caller{}, "", "", connectError(err)
	}
	return c, id, p, nil
}

// shell runs a POSIX shell script in the sandbox, through the exec path, for what the
// contract has no call for; args are its $1, $2, ...
func (h *Handler) shell(ctx context.Context, c sandboxes.Caller, id, script string, args ...string) error {
	_, err := h.shellOutput(ctx, c, id, script, args...)
	return err
}

// shellOutput is shell, returning the script's standard output.
func (h *Handler) shellOutput(ctx context.Context, c sandboxes.Caller, id, script string, args ...string) (string, error) {
	cmd, err := h.svc.Command(ctx, c, id, api.ExecRequest{Args: append([]string{"sh", "-c", script, "sh"}, args...),
		TimeoutSeconds: shellTimeoutSeconds})
	if err != nil {
		return "", connectError(err)
	}
	res, err := cmd.Run(ctx)
	if err != nil {
		return "", connectError(err)
	}
	if res.ExitCode != 0 {
		return "", connect.NewError(connect.CodeInternal, fmt.Errorf("%s exited with %d: %s", strings.Fields(script)[0], res.ExitCode, strings.TrimSpace(res.Stderr)))
	}
	return res.Stdout, nil
}

func (s *filesystemService) Stat(ctx context.Context, req *connect.Request[filesystempb.StatRequest]) (*connect.Response[filesystempb.StatResponse], error) {
	c, id, p, err := s.h.target(ctx, req.Header(), req.Msg.Path)
	if err != nil {
		return nil, err
	}
	e, err := s.h.stat(ctx, c, id, p)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&filesystempb.StatResponse{Entry: e}), nil
}

func (s *filesystemService) ListDir(ctx context.Context, req *connect.Request[filesystempb.ListDirRequest]) (*connect.Response[filesystempb.ListDirResponse], error) {
	c, id, root, err := s.h.target(ctx, req.Header(), req.Msg.Path)
	if err != nil {
		return nil, err
	}
	depth := max(req.Msg.Depth, 1)
	if root == "" {
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("a path is required"))
	}
	var out []*filesystempb.EntryInfo
	// Level by level: the contract lists one directory at a time.
	dirs := []string{root}
	for level := uint32(1); level <= depth && len(dirs) > 0; level++ {
		var next []string
		for _, dir := range dirs {
			items, err := s.h.svc.ListFiles(ctx, c, id, dir)
			if err != nil {
				return nil, connectError(err)
			}
			for _, fi := range items {
				e := entryOf(fi, strings.TrimSuffix(dir, "/"))
				out = append(out, e)
				if fi.IsDir {
					next = append(next, e.Path)
				}
			}
			if len(out) > maxListEntries {
				return nil, connect.NewError(connect.CodeResourceExhausted, fmt.Errorf("%s holds over %d entries to depth %d", root, maxListEntries, depth))
			}
		}
		dirs = next
	}
	return connect.NewResponse(&filesystempb.ListDirResponse{Entries: out}), nil
}

func (s *filesystemService) MakeDir(ctx context.Context, req *connect.Request[filesystempb.MakeDirRequest]) (*connect.Response[filesystempb.MakeDirResponse], error) {
	c, id, p, err := s.h.target(ctx, req.Header(), req.Msg.Path)
	if err != nil {
		return nil, err
	}
	e, err := s.h.stat(ctx, c, id, p)
	switch {
	case err == nil && e.Type == filesystempb.FileType_FILE_TYPE_DIRECTORY:
		// The SDK's makeDir answers false on already_exists.
		return nil, connect.NewError(connect.CodeAlreadyExists, fmt.Errorf("directory %s already exists", p))
	case err == nil:
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("%s exists and is not a directory", p))
	case connect.CodeOf(err) != connect.CodeNotFound:
		return nil, err
	}
	if err := s.h.shell(ctx, c, id, `mkdir -p -- "$1"`, p); err != nil {
		return nil, err
	}
	if e, err = s.h.stat(ctx, c, id, p); err != nil {
		return nil, err
	}
	return connect.NewResponse(&filesystempb.MakeDirResponse{Entry: e}), nil
}

func (s *filesystemService) Move(ctx context.Context, req *connect.Request[filesystempb.MoveRequest]) (*connect.Response[filesystempb.MoveResponse], error) {
	c, id, src, err := s.h.target(ctx, req.Header(), req.Msg.Source)
	if err != nil {
		return nil, err
	}
	dst, err := s.h.resolve(ctx, c, id, req.Msg.Destination)
	if err != nil {
		return nil, connectError(err)
	}
	if dst == "" {
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("a destination is required"))
	}
	if _, err := s.h.stat(ctx, c, id, src); err != nil {
		return nil, err
	}
	// As envd's Move, the destination's parents are made.
	if err := s.h.shell(ctx, c, id, `mkdir -p -- "$(dirname -- "$2")" && mv -- "$1" "$2"`, src, dst); err != nil {
		return nil, err
	}
	e, err := s.h.stat(ctx, c, id, dst)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&filesystempb.MoveResponse{Entry: e}), nil
}

func (s *filesystemService) Remove(ctx context.Context, req *connect.Request[filesystempb.RemoveRequest]) (*connect.Response[filesystempb.RemoveResponse], error) {
	c, id, p, err := s.h.target(ctx, req.Header(), req.Msg.Path)
	if err != nil {
		return nil, err
	}
	if p == "" {
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("a path is required"))
	}
	if err := s.h.shell(ctx, c, id, `rm -rf -- "$1"`, p); err != nil {
		return nil, err
	}
	return connect.NewResponse(&filesystempb.RemoveResponse{}), nil
}
