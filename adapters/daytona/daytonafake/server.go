// Package daytonafake is an in-memory Daytona API and toolbox for tests, written from
// Daytona's published OpenAPI descriptions (api.json and toolbox.json) and the wire
// notes next to them: bearer auth, {statusCode, error, message} errors, cursor-paged
// listing with a JSON label filter, asynchronous state changes, and a toolbox whose
// process/execute runs commands through /bin/sh in a per-sandbox directory and
// answers stdout and stderr combined, as Daytona's does.
//
// State changes settle after Settle reads of the sandbox (or snapshot), so an adapter
// must poll for them as it would against the real service, and tests need no sleeps.
package daytonafake

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
)

// Server is the fake. Set the exported fields before serving.
type Server struct {
	// APIKey is the only bearer token accepted.
	APIKey string
	// Class is the sandboxClass of every sandbox: "container" (default) or "linux-vm".
	Class string
	// PageSize caps list pages below the client's limit when positive.
	PageSize int
	// Settle is how many reads a state change takes to complete; 1 when zero.
	Settle int
	// BaseSnapshots are snapshot names create accepts besides those taken from
	// sandboxes; the empty name (Daytona's default) is always accepted.
	BaseSnapshots []string
	// CPUQuota, when positive, is the organisation's CPU limit, each sandbox taking
	// one CPU until it is destroyed: a create beyond it is refused with 403 "Total
	// CPU limit exceeded", as Daytona refuses an organisation over its quota.
	CPUQuota int

	root string
	mux  *http.ServeMux

	mu        sync.Mutex
	seq       int
	sandboxes map[string]*sandbox // by ID
	snapshots map[string]*snapshot
	intercept func(http.ResponseWriter, *http.Request) bool
	failWith  string
	creates   int
}

type sandbox struct {
	seq              int
	ID               string            `json:"id"`
	Name             string            `json:"name"`
	Target           string            `json:"target"`
	State            string            `json:"state"`
	DesiredState     string            `json:"desiredState,omitempty"`
	ErrorReason      string            `json:"errorReason,omitempty"`
	Labels           map[string]string `json:"labels"`
	Env              map[string]string `json:"env"`
	Snapshot         string            `json:"snapshot,omitempty"`
	SandboxClass     string            `json:"sandboxClass"`
	AutoStopInterval *int              `json:"autoStopInterval,omitempty"`
	TTLMinutes       int               `json:"-"`
	ToolboxProxyURL  string            `json:"toolboxProxyUrl"`
	PreviewSeconds   int               `json:"-"`

	dir  string
	next string // the state a change in progress ends in
	wait int    // reads left before next is reached
}

type snapshot struct {
	ID       string  `json:"id"`
	Name     string  `json:"name"`
	State    string  `json:"state"`
	Size     float64 `json:"size"`
	Memory   bool    `json:"-"`
	dir      string
	wait     int
	sourceID string
}

// New returns a fake keeping sandbox files under dir (a test's temp dir).
func New(apiKey, dir string) *Server {
	s := &Server{APIKey: apiKey, root: dir, sandboxes: map[string]*sandbox{}, snapshots: map[string]*snapshot{}}
	m := http.NewServeMux()
	m.HandleFunc("GET /sandbox", s.list)
	m.HandleFunc("POST /sandbox", s.create)
	m.HandleFunc("GET /sandbox/{id}", s.get)
	m.HandleFunc("DELETE /sandbox/{id}", s.delete)
	m.HandleFunc("POST /sandbox/{id}/{action}", s.action)
	m.HandleFunc("POST /sandbox/{id}/ttl/{minutes}", s.ttl)
	m.HandleFunc("GET /sandbox/{id}/ports/{port}/signed-preview-url", s.preview)
	m.HandleFunc("GET /snapshots/{id}", s.getSnapshot)
	m.HandleFunc("DELETE /snapshots/{id}", s.deleteSnapshot)
	m.HandleFunc("POST /toolbox/{id}/process/execute", s.execute)
	m.HandleFunc("GET /toolbox/{id}/files", s.listFiles)
	m.HandleFunc("GET /toolbox/{id}/files/download", s.download)
	m.HandleFunc("POST /toolbox/{id}/files/upload-v2", s.upload)
	s.mux = m
	return s
}

// SetIntercept installs f in front of every route; when f returns true it has
// answered the request. Tests inject failures with it.
func (s *Server) SetIntercept(f func(http.ResponseWriter, *http.Request) bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.intercept = f
}

// FailCreates makes sandboxes created from now on end in the error state with reason.
func (s *Server) FailCreates(reason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failWith = reason
}

// Creates counts the sandboxes created.
func (s *Server) Creates() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.creates
}

// SandboxView is what a test can inspect of a sandbox.
type SandboxView struct {
	ID, Name, State, Target, Snapshot string
	Labels, Env                       map[string]string
	AutoStopInterval                  *int
	TTLMinutes, PreviewSeconds        int
}

// Sandbox returns the sandbox with the given ID or name.
func (s *Server) Sandbox(idOrName string) (SandboxView, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sb := s.find(idOrName)
	if sb == nil {
		return SandboxView{}, false
	}
	return SandboxView{ID: sb.ID, Name: sb.Name, State: sb.State, Target: sb.Target, Snapshot: sb.Snapshot,
		Labels: maps.Clone(sb.Labels), Env: maps.Clone(sb.Env), AutoStopInterval: sb.AutoStopInterval,
		TTLMinutes: sb.TTLMinutes, PreviewSeconds: sb.PreviewSeconds}, true
}

// Snapshots returns the names of the snapshots that exist.
func (s *Server) Snapshots() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, snap := range s.snapshots {
		out = append(out, snap.Name)
	}
	slices.Sort(out)
	return out
}

// Count returns how many sandboxes exist that are not deleted or being deleted.
func (s *Server) Count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, sb := range s.sandboxes {
		if !gone(sb.State) {
			n++
		}
	}
	return n
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	f := s.intercept
	s.mu.Unlock()
	if f != nil && f(w, r) {
		return
	}
	if r.Header.Get("Authorization") != "Bearer "+s.APIKey {
		// Daytona's message can quote what was presented; adapters must not echo it.
		WriteError(w, http.StatusUnauthorized, "invalid credentials: "+r.Header.Get("Authorization"))
		return
	}
	s.mux.ServeHTTP(w, r)
}

// WriteError answers Daytona's error shape.
func WriteError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]any{"statusCode": status, "error": http.StatusText(status), "message": msg})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func gone(state string) bool { return state == "destroyed" || state == "destroying" }

// find looks a sandbox up by ID, then by name among the live ones. Callers hold mu.
func (s *Server) find(idOrName string) *sandbox {
	if sb, ok := s.sandboxes[idOrName]; ok {
		return sb
	}
	for _, sb := range s.sandboxes {
		if sb.Name == idOrName && !gone(sb.State) {
			return sb
		}
	}
	return nil
}

// read advances a change in progress by one read. Callers hold mu.
func (s *Server) read(sb *sandbox) {
	if sb.next == "" {
		return
	}
	if sb.wait--; sb.wait > 0 {
		return
	}
	sb.State, sb.next = sb.next, ""
	if sb.State == "destroyed" {
		_ = os.RemoveAll(sb.dir)
	}
}

// change starts a state change through transit to next. Callers hold mu.
func (s *Server) change(sb *sandbox, transit, next string) {
	sb.State, sb.next, sb.wait = transit, next, max(s.Settle, 1)
}

func (s *Server) view(r *http.Request, sb *sandbox) sandbox {
	out := *sb
	out.Labels, out.Env = maps.Clone(sb.Labels), maps.Clone(sb.Env)
	out.ToolboxProxyURL = "http://" + r.Host + "/toolbox"
	return out
}

func (s *Server) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	var filter map[string]string
	if raw := q.Get("labels"); raw != "" {
		if err := json.Unmarshal([]byte(raw), &filter); err != nil {
			WriteError(w, http.StatusBadRequest, "labels must be a JSON object of strings")
			return
		}
	}
	limit := 100
	if raw := q.Get("limit"); raw != "" {
		n, err := strconv.Atoi(raw)
		if err != nil || n < 1 || n > 200 {
			WriteError(w, http.StatusBadRequest, "limit must be between 1 and 200")
			return
		}
		limit = n
	}
	if s.PageSize > 0 {
		limit = min(limit, s.PageSize)
	}
	after := 0
	if c := q.Get("cursor"); c != "" {
		n, err := strconv.Atoi(c)
		if err != nil {
			WriteError(w, http.StatusBadRequest, "invalid cursor")
			return
		}
		after = n
	}
	s.mu.Lock()
	var match []*sandbox
	for _, sb := range s.sandboxes {
		if sb.seq <= after || sb.State == "destroyed" {
			continue
		}
		ok := true
		for k, v := range filter {
			ok = ok && sb.Labels[k] == v
		}
		if ok {
			match = append(match, sb)
		}
	}
	slices.SortFunc(match, func(a, b *sandbox) int { return a.seq - b.seq })
	var next *string
	if len(match) > limit {
		match = match[:limit]
		c := strconv.Itoa(match[limit-1].seq)
		next = &c
	}
	items := make([]sandbox, 0, len(match))
	for _, sb := range match {
		items = append(items, s.view(r, sb))
	}
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{"items": items, "nextCursor": next})
}

type createBody struct {
	Name             string            `json:"name"`
	Snapshot         string            `json:"snapshot"`
	Target           string            `json:"target"`
	Env              map[string]string `json:"env"`
	Labels           map[string]string `json:"labels"`
	AutoStopInterval *int              `json:"autoStopInterval"`
	TTLMinutes       int               `json:"ttlMinutes"`
}

func (s *Server) create(w http.ResponseWriter, r *http.Request) {
	var body createBody
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		WriteError(w, http.StatusBadRequest, "malformed body: "+err.Error())
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	id := fmt.Sprintf("dtn%06d", s.seq)
	if body.Name == "" {
		body.Name = id
	}
	if s.find(body.Name) != nil {
		WriteError(w, http.StatusConflict, fmt.Sprintf("sandbox with name %s already exists", body.Name))
		return
	}
	if s.CPUQuota > 0 && s.liveCount() >= s.CPUQuota {
		WriteError(w, http.StatusForbidden, fmt.Sprintf("Total CPU limit exceeded. Maximum allowed: %d.", s.CPUQuota))
		return
	}
	dir := filepath.Join(s.root, id)
	var src string
	if body.Snapshot != "" && !slices.Contains(s.BaseSnapshots, body.Snapshot) {
		snap := s.findSnapshot(body.Snapshot)
		if snap == nil || snap.State != "active" {
			WriteError(w, http.StatusBadRequest, fmt.Sprintf("snapshot %s not found", body.Snapshot))
			return
		}
		src = snap.dir
	}
	if err := copyDir(src, dir); err != nil {
		WriteError(w, http.StatusInternalServerError, err.Error())
		return
	}
	class := s.Class
	if class == "" {
		class = "container"
	}
	sb := &sandbox{seq: s.seq, ID: id, Name: body.Name, Target: body.Target, Labels: body.Labels, Env: body.Env,
		Snapshot: body.Snapshot, SandboxClass: class, AutoStopInterval: body.AutoStopInterval,
		TTLMinutes: body.TTLMinutes, dir: dir}
	if sb.Labels == nil {
		sb.Labels = map[string]string{}
	}
	s.change(sb, "creating", "started")
	if s.failWith != "" {
		sb.next, sb.ErrorReason = "error", s.failWith
	}
	s.sandboxes[id] = sb
	s.creates++
	writeJSON(w, http.StatusOK, s.view(r, sb))
}

// liveCount is how many sandboxes count against the quota. Callers hold mu.
func (s *Server) liveCount() int {
	n := 0
	for _, sb := range s.sandboxes {
		if !gone(sb.State) {
			n++
		}
	}
	return n
}

// lookup finds a sandbox for a route, answering 404 itself. Callers hold mu.
func (s *Server) lookup(w http.ResponseWriter, r *http.Request) *sandbox {
	sb := s.find(r.PathValue("id"))
	if sb == nil {
		WriteError(w, http.StatusNotFound, fmt.Sprintf("sandbox %s not found", r.PathValue("id")))
	}
	return sb
}

func (s *Server) get(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sb := s.lookup(w, r); sb != nil {
		s.read(sb)
		writeJSON(w, http.StatusOK, s.view(r, sb))
	}
}

func (s *Server) delete(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sb := s.lookup(w, r)
	if sb == nil {
		return
	}
	if sb.State == "destroyed" {
		WriteError(w, http.StatusNotFound, fmt.Sprintf("sandbox %s not found", sb.ID))
		return
	}
	if sb.State != "destroying" {
		s.change(sb, "destroying", "destroyed")
		sb.DesiredState = "destroyed"
	}
	writeJSON(w, http.StatusOK, s.view(r, sb))
}
