package daytonafake

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// started finds a started sandbox for a toolbox route and returns its directory and
// env, answering the error itself otherwise.
func (s *Server) started(w http.ResponseWriter, r *http.Request) (dir string, env map[string]string, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sb := s.lookup(w, r)
	if sb == nil {
		return "", nil, false
	}
	if sb.State != "started" {
		WriteError(w, http.StatusBadRequest, "sandbox is not running")
		return "", nil, false
	}
	return sb.dir, sb.Env, true
}

// resolve maps a sandbox path onto the sandbox's directory: absolute paths are taken
// from the directory as root, relative ones from it as the working directory.
func resolve(root, p string) (string, error) {
	full := filepath.Join(root, filepath.FromSlash(p))
	rel, err := filepath.Rel(root, full)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return "", fmt.Errorf("path %q is outside the sandbox", p)
	}
	return full, nil
}

type executeRequest struct {
	Command string            `json:"command"`
	Cwd     string            `json:"cwd"`
	Envs    map[string]string `json:"envs"`
	Timeout *int              `json:"timeout"`
}

// execute runs the command with /bin/sh -c and answers {exitCode, result}, stdout
// and stderr written to one buffer in the order produced. A command still running at
// its timeout (10 s unless given) is killed and answered 408.
func (s *Server) execute(w http.ResponseWriter, r *http.Request) {
	dir, env, ok := s.started(w, r)
	if !ok {
		return
	}
	var req executeRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Command == "" {
		WriteError(w, http.StatusBadRequest, "command is required")
		return
	}
	timeout := 10
	if req.Timeout != nil && *req.Timeout > 0 {
		timeout = *req.Timeout
	}
	cwd := dir
	if req.Cwd != "" {
		var err error
		if cwd, err = resolve(dir, req.Cwd); err != nil {
			WriteError(w, http.StatusBadRequest, err.Error())
			return
		}
	}
	ctx, cancel := context.WithTimeout(r.Context(), time.Duration(timeout)*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", req.Command)
	cmd.Dir = cwd
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir}
	for _, m := range []map[string]string{env, req.Envs} {
		for k, v := range m {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	prepare(cmd)
	err := cmd.Run()
	if r.Context().Err() != nil {
		return // the client went away
	}
	if ctx.Err() != nil {
		WriteError(w, http.StatusRequestTimeout, "command execution timeout")
		return
	}
	code := 0
	if err != nil {
		var exitErr *exec.ExitError
		if !errors.As(err, &exitErr) {
			WriteError(w, http.StatusBadRequest, err.Error())
			return
		}
		code = exitErr.ExitCode()
	}
	writeJSON(w, http.StatusOK, map[string]any{"exitCode": code, "result": out.String()})
}

func (s *Server) pathArg(w http.ResponseWriter, r *http.Request) (string, bool) {
	dir, _, ok := s.started(w, r)
	if !ok {
		return "", false
	}
	p := r.URL.Query().Get("path")
	if p == "" {
		p = "."
	}
	full, err := resolve(dir, p)
	if err != nil {
		WriteError(w, http.StatusBadRequest, err.Error())
		return "", false
	}
	return full, true
}

func (s *Server) listFiles(w http.ResponseWriter, r *http.Request) {
	full, ok := s.pathArg(w, r)
	if !ok {
		return
	}
	entries, err := os.ReadDir(full)
	if errors.Is(err, os.ErrNotExist) {
		WriteError(w, http.StatusNotFound, "directory not found")
		return
	} else if err != nil {
		WriteError(w, http.StatusBadRequest, err.Error())
		return
	}
	out := make([]map[string]any, 0, len(entries))
	for _, e := range entries {
		info, err := e.Info()
		if err != nil {
			continue
		}
		out = append(out, map[string]any{
			"name": e.Name(), "isDir": e.IsDir(), "size": info.Size(), "mode": info.Mode().String(),
			"permissions": strconv.FormatUint(uint64(info.Mode().Perm()), 8),
			"modTime":     info.ModTime().String(), "modifiedAt": info.ModTime().UTC().Format(time.RFC3339Nano),
			"owner": "daytona", "group": "daytona",
		})
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) download(w http.ResponseWriter, r *http.Request) {
	full, ok := s.pathArg(w, r)
	if !ok {
		return
	}
	f, err := os.Open(full)
	if errors.Is(err, os.ErrNotExist) {
		WriteError(w, http.StatusNotFound, "file not found")
		return
	} else if err != nil {
		WriteError(w, http.StatusBadRequest, err.Error())
		return
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil || info.IsDir() {
		WriteError(w, http.StatusBadRequest, "path is a directory")
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.FormatInt(info.Size(), 10))
	_, _ = io.Copy(w, f)
}

// upload takes the file as a multipart "file" field or as the raw body, creating
// parent directories and replacing an existing file.
func (s *Server) upload(w http.ResponseWriter, r *http.Request) {
	full, ok := s.pathArg(w, r)
	if !ok {
		return
	}
	var src io.Reader = r.Body
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt == "multipart/form-data" {
		f, _, err := r.FormFile("file")
		if err != nil {
			WriteError(w, http.StatusBadRequest, "multipart upload needs a file field")
			return
		}
		defer f.Close()
		src = f
	}
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		WriteError(w, http.StatusBadRequest, err.Error())
		return
	}
	out, err := os.Create(full)
	if err != nil {
		WriteError(w, http.StatusBadRequest, err.Error())
		return
	}
	_, err = io.Copy(out, src)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		WriteError(w, http.StatusInternalServerError, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"name": filepath.Base(full), "path": r.URL.Query().Get("path"), "type": "file"})
}
