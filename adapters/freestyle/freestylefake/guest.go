package freestylefake

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// mappedRoots are the guest directories that live in the VM's own directory. Other
// absolute paths in a command are the host's; tests keep to these.
var mappedRoots = []string{"/etc/differently", "/tmp"}

// mapPaths rewrites every mapped root that starts a path in cmd (not preceded by a
// path character, followed by the end, a slash or a non-path character) to its place
// under dir.
func mapPaths(cmd, dir string) string {
	var b strings.Builder
	pathChar := func(c byte) bool {
		return c == '/' || c == '.' || c == '_' || c == '-' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
	}
	for i := 0; i < len(cmd); {
		matched := false
		if i == 0 || !pathChar(cmd[i-1]) {
			for _, root := range mappedRoots {
				end := i + len(root)
				if strings.HasPrefix(cmd[i:], root) && (end == len(cmd) || cmd[end] == '/' || !pathChar(cmd[end])) {
					b.WriteString(dir + root)
					i, matched = end, true
					break
				}
			}
		}
		if !matched {
			b.WriteByte(cmd[i])
			i++
		}
	}
	return b.String()
}

type execBody struct {
	Command   string            `json:"command"`
	TimeoutMs *int64            `json:"timeoutMs"`
	Env       map[string]string `json:"env"`
	Stdin     string            `json:"stdin"`
}

func (s *Server) execAwait(w http.ResponseWriter, r *http.Request) {
	var b execBody
	if !decode(w, r, &b) {
		return
	}
	timeout := int64(60_000)
	if b.TimeoutMs != nil {
		timeout = *b.TimeoutMs
	}
	stdin, err := base64.StdEncoding.DecodeString(b.Stdin)
	if err != nil || b.Command == "" || timeout < 1 || timeout > 300_000 {
		writeErr(w, http.StatusBadRequest, "BAD_REQUEST", "command is required, timeoutMs is 1-300000, stdin is base64")
		return
	}
	s.mu.Lock()
	vm := s.vmOr404(w, r)
	if vm == nil {
		s.mu.Unlock()
		return
	}
	if vm.State != "running" || vm.next != "" {
		s.mu.Unlock()
		writeErr(w, http.StatusConflict, "VM_NOT_RUNNING", "vm is "+vm.State)
		return
	}
	vm.lastExecEnvs = b.Env
	dir := vm.dir
	if strings.Contains(b.Command, "poweroff") {
		// Never run on the host: the guest goes down, observed on the next read.
		vm.next = "stopped"
		s.mu.Unlock()
		writeJSON(w, http.StatusOK, map[string]any{"stdout": "", "stderr": "", "statusCode": 0})
		return
	}
	s.mu.Unlock()

	ctx, cancel := context.WithTimeout(r.Context(), time.Duration(timeout)*time.Millisecond)
	defer cancel()
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", mapPaths(b.Command, dir))
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir}
	for k, v := range b.Env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Stdin = bytes.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	// Its own process group, so a timeout kills the command's children too.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	err = cmd.Run()
	var code any
	var exitErr *exec.ExitError
	switch {
	case ctx.Err() != nil:
		code = nil
	case err == nil:
		code = 0
	case errors.As(err, &exitErr):
		code = exitErr.ExitCode()
	default:
		writeErr(w, http.StatusInternalServerError, "EXEC_FAILED", err.Error())
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"stdout": stdout.String(), "stderr": stderr.String(), "statusCode": code})
}

// guestPath resolves the path query parameter inside the VM's directory. The caller
// must not hold s.mu.
func (s *Server) guestPath(w http.ResponseWriter, r *http.Request, p string) (string, bool) {
	s.mu.Lock()
	vm := s.vmOr404(w, r)
	var dir, state string
	if vm != nil {
		dir, state = vm.dir, vm.State
	}
	s.mu.Unlock()
	switch {
	case vm == nil:
		return "", false
	case state != "running":
		writeErr(w, http.StatusConflict, "VM_NOT_RUNNING", "vm is "+state)
		return "", false
	case !strings.HasPrefix(p, "/"):
		writeErr(w, http.StatusBadRequest, "BAD_REQUEST", "path must be absolute")
		return "", false
	}
	return filepath.Join(dir, filepath.FromSlash(path.Clean(p))), true
}

func fsError(w http.ResponseWriter, err error) {
	if errors.Is(err, fs.ErrNotExist) {
		writeErr(w, http.StatusNotFound, "FILE_NOT_FOUND", "no such file or directory")
		return
	}
	writeErr(w, http.StatusBadRequest, "FS_ERROR", err.Error())
}

func (s *Server) fsRead(w http.ResponseWriter, r *http.Request) {
	p, ok := s.guestPath(w, r, r.URL.Query().Get("path"))
	if !ok {
		return
	}
	f, err := os.Open(p)
	if err != nil {
		fsError(w, err)
		return
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || st.IsDir() {
		writeErr(w, http.StatusBadRequest, "IS_A_DIRECTORY", "path is a directory")
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	_, _ = io.Copy(w, f)
}

func (s *Server) fsWrite(w http.ResponseWriter, r *http.Request) {
	p, ok := s.guestPath(w, r, r.URL.Query().Get("path"))
	if !ok {
		return
	}
	mode := uint64(0o644)
	if m := r.URL.Query().Get("mode"); m != "" {
		var err error
		if mode, err = strconv.ParseUint(m, 8, 32); err != nil || mode > 0o7777 {
			writeErr(w, http.StatusBadRequest, "BAD_REQUEST", "mode is octal")
			return
		}
	}
	data, err := io.ReadAll(r.Body)
	if err != nil {
		writeErr(w, http.StatusBadRequest, "BAD_REQUEST", err.Error())
		return
	}
	// Parents are not created: that is what mkdir is for.
	if err := os.WriteFile(p, data, fs.FileMode(mode)); err != nil {
		fsError(w, err)
		return
	}
	if err := os.Chmod(p, fs.FileMode(mode)); err != nil {
		fsError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]bool{"ok": true})
}

func (s *Server) fsMkdir(w http.ResponseWriter, r *http.Request) {
	var b struct {
		Path string `json:"path"`
	}
	if !decode(w, r, &b) {
		return
	}
	p, ok := s.guestPath(w, r, b.Path)
	if !ok {
		return
	}
	if err := os.MkdirAll(p, 0o755); err != nil {
		fsError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]bool{"ok": true})
}

func (s *Server) fsDir(w http.ResponseWriter, r *http.Request) {
	p, ok := s.guestPath(w, r, r.URL.Query().Get("path"))
	if !ok {
		return
	}
	entries, err := os.ReadDir(p)
	if err != nil {
		fsError(w, err)
		return
	}
	out := make([]map[string]string, 0, len(entries))
	for _, e := range entries {
		kind := "file"
		if e.IsDir() {
			kind = "dir"
		}
		out = append(out, map[string]string{"name": e.Name(), "kind": kind})
	}
	writeJSON(w, http.StatusOK, map[string]any{"entries": out})
}

// copyTree copies the regular files and directories under src to dst.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			return os.MkdirAll(target, info.Mode().Perm()|0o700)
		case info.Mode().IsRegular():
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			return os.WriteFile(target, data, info.Mode().Perm())
		}
		return nil
	})
}
