package ossfake

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// serveExecd routes /execd/{id}/... to the sandbox's execd, which checks its token.
func (s *Server) serveExecd(w http.ResponseWriter, r *http.Request) {
	rest, ok := strings.CutPrefix(r.URL.Path, "/execd/")
	if !ok {
		writeError(w, http.StatusNotFound, "NOT_FOUND", "no route %s", r.URL.Path)
		return
	}
	id, sub, _ := strings.Cut(rest, "/")
	s.execdFor(w, r, id, "/"+sub, true)
}

// execdFor serves one execd request for sandbox id. Direct requests carry the execd
// token; proxied ones were authenticated by the lifecycle server.
func (s *Server) execdFor(w http.ResponseWriter, r *http.Request, id, route string, direct bool) {
	if direct && s.intercept(w, r, false) {
		return
	}
	s.mu.Lock()
	sb := s.sandboxes[id]
	var dir, token, state string
	var env map[string]string
	if sb != nil {
		dir, token, state, env = sb.Dir, sb.Token, sb.State, sb.Env
	}
	s.mu.Unlock()
	switch {
	case sb == nil || state == "Terminated" || state == "Stopping":
		writeError(w, http.StatusBadGateway, "BAD_GATEWAY", "sandbox %s is gone", id)
		return
	case direct && r.Header.Get("X-EXECD-ACCESS-TOKEN") != token:
		writeError(w, http.StatusUnauthorized, "UNAUTHORIZED", "bad execd token")
		return
	case state != "Running":
		writeError(w, http.StatusServiceUnavailable, "UNAVAILABLE", "sandbox %s is %s", id, state)
		return
	}
	resolve := func(p string) string {
		if filepath.IsAbs(p) {
			return p
		}
		return filepath.Join(dir, p)
	}
	q := r.URL.Query()
	switch {
	case route == "/ping" && r.Method == http.MethodGet:
		w.WriteHeader(http.StatusOK)
	case route == "/command" && r.Method == http.MethodPost:
		s.command(w, r, dir, env)
	case route == "/command" && r.Method == http.MethodDelete:
		s.mu.Lock()
		kill := s.procs[q.Get("id")]
		s.mu.Unlock()
		if kill != nil {
			kill()
		}
		w.WriteHeader(http.StatusOK)
	case route == "/files/download" && r.Method == http.MethodGet:
		f, err := os.Open(resolve(q.Get("path")))
		if err != nil {
			writeError(w, http.StatusNotFound, "FILE_NOT_FOUND", "file not found")
			return
		}
		defer f.Close()
		if st, err := f.Stat(); err == nil {
			w.Header().Set("Content-Length", strconv.FormatInt(st.Size(), 10))
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		_, _ = io.Copy(w, f)
	case route == "/files/upload" && r.Method == http.MethodPost:
		upload(w, r, resolve)
	case route == "/files" && r.Method == http.MethodDelete:
		for _, p := range q["path"] {
			_ = os.Remove(resolve(p))
		}
		w.WriteHeader(http.StatusOK)
	case route == "/directories" && r.Method == http.MethodPost:
		var dirs map[string]struct {
			Mode int `json:"mode"`
		}
		if err := json.NewDecoder(r.Body).Decode(&dirs); err != nil {
			writeError(w, http.StatusBadRequest, "INVALID_REQUEST_BODY", "%v", err)
			return
		}
		for p := range dirs {
			if err := os.MkdirAll(resolve(p), 0o755); err != nil {
				writeError(w, http.StatusInternalServerError, "RUNTIME_ERROR", "%v", err)
				return
			}
		}
		w.WriteHeader(http.StatusOK)
	case route == "/directories/list" && r.Method == http.MethodGet:
		listDir(w, resolve(q.Get("path")))
	default:
		writeError(w, http.StatusNotFound, "NOT_FOUND", "no route %s %s", r.Method, route)
	}
}

// upload reads metadata/file part pairs, as execd does.
func upload(w http.ResponseWriter, r *http.Request, resolve func(string) string) {
	mr, err := r.MultipartReader()
	if err != nil {
		writeError(w, http.StatusBadRequest, "INVALID_REQUEST_BODY", "%v", err)
		return
	}
	var target string
	var mode os.FileMode = 0o644
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			writeError(w, http.StatusBadRequest, "INVALID_REQUEST_BODY", "%v", err)
			return
		}
		switch part.FormName() {
		case "metadata":
			if part.FileName() == "" {
				writeError(w, http.StatusBadRequest, "INVALID_REQUEST_BODY", "metadata part needs a filename")
				return
			}
			var meta struct {
				Path string `json:"path"`
				Mode int    `json:"mode"`
			}
			if err := json.NewDecoder(part).Decode(&meta); err != nil || meta.Path == "" {
				writeError(w, http.StatusBadRequest, "INVALID_REQUEST_BODY", "bad metadata")
				return
			}
			target = resolve(meta.Path)
			if m, err := strconv.ParseUint(strconv.Itoa(meta.Mode), 8, 32); err == nil && meta.Mode != 0 {
				mode = os.FileMode(m)
			}
		case "file":
			if err := writePart(part, target, mode); err != nil {
				writeError(w, http.StatusInternalServerError, "RUNTIME_ERROR", "%v", err)
				return
			}
			target = ""
		}
	}
	w.WriteHeader(http.StatusOK)
}

func writePart(part *multipart.Part, target string, mode os.FileMode) error {
	if target == "" {
		return errors.New("file part without metadata")
	}
	f, err := os.OpenFile(target, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, part); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func listDir(w http.ResponseWriter, dir string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		writeError(w, http.StatusNotFound, "FILE_NOT_FOUND", "directory not found")
		return
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].Name() < entries[j].Name() })
	out := []map[string]any{}
	for _, e := range entries {
		info, err := e.Info()
		if err != nil {
			continue
		}
		typ := "file"
		if e.IsDir() {
			typ = "directory"
		}
		mode, _ := strconv.Atoi(strconv.FormatUint(uint64(info.Mode().Perm()), 8))
		out = append(out, map[string]any{"path": filepath.Join(dir, e.Name()), "type": typ, "size": info.Size(),
			"modified_at": info.ModTime().UTC().Format(time.RFC3339), "created_at": info.ModTime().UTC().Format(time.RFC3339),
			"owner": "root", "group": "root", "mode": mode})
	}
	writeJSON(w, http.StatusOK, out)
}

// command runs bash -c like execd and streams one event per output line (without
// its terminator; an empty line as "\n"; a last fragment as is).
func (s *Server) command(w http.ResponseWriter, r *http.Request, dir string, env map[string]string) {
	var req struct {
		Command string            `json:"command"`
		Cwd     string            `json:"cwd"`
		Timeout int64             `json:"timeout"`
		Envs    map[string]string `json:"envs"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Command == "" {
		writeError(w, http.StatusBadRequest, "INVALID_REQUEST_BODY", "error parsing request")
		return
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	if req.Timeout > 0 {
		ctx, cancel = context.WithTimeout(ctx, time.Duration(req.Timeout)*time.Millisecond)
		defer cancel()
	}
	shell := "/bin/sh"
	if p, err := exec.LookPath("bash"); err == nil {
		shell = p
	}
	cmd := exec.CommandContext(ctx, shell, "-c", req.Command)
	cmd.Dir = dir
	if req.Cwd != "" {
		cmd.Dir = req.Cwd
		if !filepath.IsAbs(req.Cwd) {
			cmd.Dir = filepath.Join(dir, req.Cwd)
		}
	}
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "LANG=C"}
	for _, m := range []map[string]string{env, req.Envs} {
		for k, v := range m {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = time.Second
	stdout, _ := cmd.StdoutPipe()
	stderr, _ := cmd.StderrPipe()

	s.mu.Lock()
	s.seq++
	id := fmt.Sprintf("cmd-%04d", s.seq)
	s.procs[id] = cancel
	f := s.faults
	cut := f.CutStream > 0
	if cut {
		s.faults.CutStream--
	}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.procs, id)
		s.mu.Unlock()
	}()

	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	var wmu sync.Mutex
	send := func(ev event) {
		ev.Timestamp = time.Now().UnixMilli()
		b, _ := json.Marshal(ev)
		wmu.Lock()
		defer wmu.Unlock()
		if f.SSE {
			fmt.Fprintf(w, "data: %s\n\n", b)
		} else {
			fmt.Fprintf(w, "%s\n\n", b)
		}
		if fl, ok := w.(http.Flusher); ok {
			fl.Flush()
		}
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		send(event{Type: "init", Text: id})
		send(event{Type: "error", Error: &eventError{EName: "CommandExecError", EValue: err.Error()}})
		return
	}
	send(event{Type: "init", Text: id})
	send(event{Type: "ping"})
	if cut {
		cancel()
		_ = cmd.Wait()
		panic(http.ErrAbortHandler) // the connection drops mid-stream
	}
	var wg sync.WaitGroup
	for name, pipe := range map[string]io.Reader{"stdout": stdout, "stderr": stderr} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			splitLines(pipe, func(text string) { send(event{Type: name, Text: text}) })
		}()
	}
	wg.Wait()
	err := cmd.Wait()
	var exitErr *exec.ExitError
	switch {
	case err == nil:
		send(event{Type: "execution_complete", ExecutionTime: time.Since(start).Milliseconds()})
	case errors.As(err, &exitErr):
		send(event{Type: "error", Error: &eventError{EName: "CommandExecError",
			EValue: strconv.Itoa(exitErr.ExitCode()), Traceback: []string{err.Error()}}})
	default:
		send(event{Type: "error", Error: &eventError{EName: "CommandExecError", EValue: err.Error()}})
	}
}

// event is one event of the command stream. Its fields are in the order of
// execd's own ServerStreamEvent, which encoding/json keeps: the type comes before
// the text, as on the wire.
type event struct {
	Type          string      `json:"type,omitempty"`
	Text          string      `json:"text,omitempty"`
	ExecutionTime int64       `json:"execution_time,omitempty"`
	Timestamp     int64       `json:"timestamp,omitempty"`
	Error         *eventError `json:"error,omitempty"`
}

type eventError struct {
	EName     string   `json:"ename,omitempty"`
	EValue    string   `json:"evalue,omitempty"`
	Traceback []string `json:"traceback,omitempty"`
}

// splitLines calls emit per line as execd does: CR, LF and CRLF end a line, the
// terminator is dropped, an empty line is reported as "\n", and a last fragment
// without terminator is flushed at the end.
func splitLines(r io.Reader, emit func(string)) {
	br := bufio.NewReader(r)
	var line []byte
	lastCR := false
	for {
		b, err := br.ReadByte()
		if err != nil {
			if len(line) > 0 {
				emit(string(line))
			}
			return
		}
		if b == '\n' || b == '\r' {
			switch {
			case len(line) > 0:
				emit(string(line))
				line = line[:0]
			case b == '\n' && lastCR:
			default:
				emit("\n")
			}
			lastCR = b == '\r'
			continue
		}
		lastCR = false
		line = append(line, b)
	}
}
