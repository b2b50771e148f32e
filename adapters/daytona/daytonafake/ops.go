package daytonafake

import (
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
)

func (s *Server) action(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sb := s.lookup(w, r)
	if sb == nil {
		return
	}
	if gone(sb.State) {
		WriteError(w, http.StatusNotFound, fmt.Sprintf("sandbox %s not found", sb.ID))
		return
	}
	switch action := r.PathValue("action"); action {
	case "stop":
		if sb.State != "started" {
			WriteError(w, http.StatusConflict, "sandbox is not started")
			return
		}
		s.change(sb, "stopping", "stopped")
	case "start":
		switch sb.State {
		case "stopped", "archived":
			s.change(sb, "starting", "started")
		case "paused":
			s.change(sb, "resuming", "started")
		default:
			WriteError(w, http.StatusConflict, "sandbox cannot be started from state "+sb.State)
			return
		}
	case "pause":
		if sb.SandboxClass != "linux-vm" {
			WriteError(w, http.StatusBadRequest, "sandbox class does not support pausing")
			return
		}
		if sb.State != "started" {
			WriteError(w, http.StatusConflict, "sandbox is not started")
			return
		}
		s.change(sb, "pausing", "paused")
	case "snapshot":
		s.snapshotSandbox(w, r, sb)
		return
	default:
		WriteError(w, http.StatusNotFound, "no such action "+action)
		return
	}
	writeJSON(w, http.StatusOK, s.view(r, sb))
}

// snapshotSandbox follows CreateSandboxSnapshot's rules: containers have no memory
// snapshots; a VM is snapshotted with memory while started, without while stopped.
// Callers hold mu.
func (s *Server) snapshotSandbox(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	var body struct {
		Name          string `json:"name"`
		IncludeMemory bool   `json:"includeMemory"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil || body.Name == "" {
		WriteError(w, http.StatusBadRequest, "a snapshot name is required")
		return
	}
	switch {
	case s.findSnapshot(body.Name) != nil:
		WriteError(w, http.StatusConflict, "snapshot "+body.Name+" already exists")
		return
	case sb.SandboxClass != "linux-vm" && body.IncludeMemory:
		WriteError(w, http.StatusBadRequest, "container sandboxes do not support memory snapshots")
		return
	case sb.SandboxClass == "linux-vm" && body.IncludeMemory && sb.State != "started":
		WriteError(w, http.StatusBadRequest, "a memory snapshot needs a started sandbox")
		return
	case sb.SandboxClass == "linux-vm" && !body.IncludeMemory && sb.State != "stopped":
		WriteError(w, http.StatusBadRequest, "a disk snapshot of a VM needs a stopped sandbox")
		return
	case sb.State != "started" && sb.State != "stopped":
		WriteError(w, http.StatusConflict, "sandbox cannot be snapshotted in state "+sb.State)
		return
	}
	s.seq++
	snap := &snapshot{ID: fmt.Sprintf("snp%06d", s.seq), Name: body.Name, State: "pending", Memory: body.IncludeMemory,
		dir: filepath.Join(s.root, "snapshots", body.Name), wait: max(s.Settle, 1), sourceID: sb.ID}
	if err := copyDir(sb.dir, snap.dir); err != nil {
		WriteError(w, http.StatusInternalServerError, err.Error())
		return
	}
	s.snapshots[snap.ID] = snap
	s.change(sb, "snapshotting", sb.State)
	writeJSON(w, http.StatusOK, s.view(r, sb))
}

// findSnapshot looks a snapshot up by ID or name. Callers hold mu.
func (s *Server) findSnapshot(idOrName string) *snapshot {
	if snap, ok := s.snapshots[idOrName]; ok {
		return snap
	}
	for _, snap := range s.snapshots {
		if snap.Name == idOrName {
			return snap
		}
	}
	return nil
}

func (s *Server) getSnapshot(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	snap := s.findSnapshot(r.PathValue("id"))
	if snap == nil {
		WriteError(w, http.StatusNotFound, "snapshot not found")
		return
	}
	if snap.State == "pending" {
		if snap.wait--; snap.wait <= 0 {
			snap.State = "active"
		}
	}
	writeJSON(w, http.StatusOK, snap)
}

// deleteSnapshot deletes by ID only, as the description says.
func (s *Server) deleteSnapshot(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	snap, ok := s.snapshots[r.PathValue("id")]
	if !ok {
		WriteError(w, http.StatusNotFound, "snapshot not found")
		return
	}
	delete(s.snapshots, snap.ID)
	_ = os.RemoveAll(snap.dir)
	w.WriteHeader(http.StatusOK)
}

func (s *Server) ttl(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sb := s.lookup(w, r)
	if sb == nil {
		return
	}
	m, err := strconv.Atoi(r.PathValue("minutes"))
	if err != nil || m < 0 {
		WriteError(w, http.StatusBadRequest, "ttlMinutes must be a non-negative number")
		return
	}
	sb.TTLMinutes = m
	writeJSON(w, http.StatusOK, s.view(r, sb))
}

func (s *Server) preview(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sb := s.lookup(w, r)
	if sb == nil {
		return
	}
	port, err := strconv.Atoi(r.PathValue("port"))
	if err != nil || port < 1 || port > 65535 {
		WriteError(w, http.StatusBadRequest, "invalid port")
		return
	}
	secs := 60
	if raw := r.URL.Query().Get("expiresInSeconds"); raw != "" {
		if secs, err = strconv.Atoi(raw); err != nil {
			WriteError(w, http.StatusBadRequest, "invalid expiresInSeconds")
			return
		}
	}
	sb.PreviewSeconds = secs
	s.seq++
	token := fmt.Sprintf("tok%06d", s.seq)
	writeJSON(w, http.StatusOK, map[string]any{"sandboxId": sb.ID, "port": port, "token": token,
		"url": fmt.Sprintf("https://%d-%s.proxy.daytona.test", port, token)})
}

// copyDir makes dst a copy of src; an empty src makes an empty dst.
func copyDir(src, dst string) error {
	if err := os.MkdirAll(dst, 0o755); err != nil || src == "" {
		return err
	}
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		in, err := os.Open(p)
		if err != nil {
			return err
		}
		defer in.Close()
		out, err := os.Create(target)
		if err != nil {
			return err
		}
		if _, err := io.Copy(out, in); err != nil {
			out.Close()
			return err
		}
		return out.Close()
	})
}
