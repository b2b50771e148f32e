// Package ossfake is an in-memory OpenSandbox server for tests, written from the
// published lifecycle and execd API descriptions and the wire details that
// specs/README.md records: the OPEN-SANDBOX-API-KEY header, {code, message} errors,
// a metadata filter that is a query string inside a query parameter, 202 answers to
// pause and resume, snapshots polled until Ready, and an execd that streams bare JSON
// events, one line of output per event.
//
// Every sandbox is a temporary directory and every command a real shell started in
// it, so exec semantics (exit codes, env, cwd, timeouts) are real. Relative paths
// resolve inside the sandbox directory; absolute paths are the host's. Faults are
// injected with SetFaults.
package ossfake

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Faults change how the server answers. Each hook may be nil.
type Faults struct {
	// Status, when it returns non-zero for a request, answers it with that status
	// and an error body instead of serving it.
	Status func(r *http.Request) int
	// Block, when it returns true, holds the request until the client gives up.
	Block func(r *http.Request) bool
	// DropCreate creates the sandbox but breaks the connection instead of answering,
	// this many times.
	DropCreate int
	// CutStream ends the next command streams after their first event, this many
	// times, without a completion event.
	CutStream int
	// PendingPolls is how many reads a new sandbox stays Pending (default 1).
	PendingPolls int
	// SSE frames execd events as "data:" lines instead of bare JSON.
	SSE bool
}

type sandbox struct {
	ID        string
	State     string
	Reason    string
	Message   string
	Metadata  map[string]string
	Env       map[string]string
	Dir       string
	Token     string
	ExpiresAt time.Time
	Created   time.Time
	pending   int
	fail      string
}

type snapshot struct {
	ID, SandboxID, State, Dir string
	Created                   time.Time
}

// Server is a fake OpenSandbox lifecycle server with execd for every sandbox.
type Server struct {
	key  string
	root string

	lifecycle *httptest.Server
	execd     *httptest.Server

	mu        sync.Mutex
	faults    Faults
	seq       int
	order     []string
	sandboxes map[string]*sandbox
	snapshots map[string]*snapshot
	creates   []map[string]any
	procs     map[string]func() // command id -> kill
}

// New starts a server accepting key; it stops when the test ends.
func New(t testing.TB, key string) *Server {
	s := &Server{key: key, root: t.TempDir(), sandboxes: map[string]*sandbox{},
		snapshots: map[string]*snapshot{}, procs: map[string]func(){}}
	s.lifecycle = httptest.NewServer(http.HandlerFunc(s.serveLifecycle))
	s.execd = httptest.NewServer(http.HandlerFunc(s.serveExecd))
	t.Cleanup(func() {
		s.lifecycle.Close()
		s.execd.Close()
	})
	return s
}

// URL is the lifecycle API root, with its /v1 prefix.
func (s *Server) URL() string { return s.lifecycle.URL + "/v1" }

// SetFaults replaces the injected faults.
func (s *Server) SetFaults(f Faults) {
	s.mu.Lock()
	s.faults = f
	s.mu.Unlock()
}

// Creates returns the bodies of every create request received, decoded.
func (s *Server) Creates() []map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]map[string]any(nil), s.creates...)
}

// Live counts sandboxes not Terminated with metadata key=value.
func (s *Server) Live(key, value string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, sb := range s.sandboxes {
		if sb.State != "Terminated" && sb.Metadata[key] == value {
			n++
		}
	}
	return n
}

// SetState forces a sandbox's state (Failed with a message, say).
func (s *Server) SetState(id, state, message string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sb := s.sandboxes[id]; sb != nil {
		sb.State, sb.Message = state, message
	}
}

// ExpiresAt returns a sandbox's expiry (zero when none).
func (s *Server) ExpiresAt(id string) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sb := s.sandboxes[id]; sb != nil {
		return sb.ExpiresAt
	}
	return time.Time{}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, code, format string, args ...any) {
	writeJSON(w, status, map[string]string{"code": code, "message": fmt.Sprintf(format, args...)})
}

// intercept applies the faults and the API key check; true means answered.
func (s *Server) intercept(w http.ResponseWriter, r *http.Request, checkKey bool) bool {
	s.mu.Lock()
	f := s.faults
	s.mu.Unlock()
	if f.Block != nil && f.Block(r) {
		<-r.Context().Done()
		return true
	}
	if f.Status != nil {
		if st := f.Status(r); st != 0 {
			// Like some real servers, echo what was sent: the client must scrub it.
			writeError(w, st, "INJECTED", "injected failure for key %s", r.Header.Get("OPEN-SANDBOX-API-KEY"))
			return true
		}
	}
	if checkKey && r.Header.Get("OPEN-SANDBOX-API-KEY") != s.key {
		writeError(w, http.StatusUnauthorized, "UNAUTHORIZED", "invalid API key %q", r.Header.Get("OPEN-SANDBOX-API-KEY"))
		return true
	}
	return false
}

var (
	sandboxRoute  = regexp.MustCompile(`^/v1/sandboxes/([^/]+)(/.*)?$`)
	snapshotRoute = regexp.MustCompile(`^/v1/snapshots/([^/]+)$`)
	metaValue     = regexp.MustCompile(`^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$`)
)

func (s *Server) serveLifecycle(w http.ResponseWriter, r *http.Request) {
	if s.intercept(w, r, true) {
		return
	}
	p := r.URL.Path
	switch {
	case p == "/v1/sandboxes" && r.Method == http.MethodGet:
		s.list(w, r)
	case p == "/v1/sandboxes" && r.Method == http.MethodPost:
		s.create(w, r)
	case snapshotRoute.MatchString(p):
		s.snapshotOp(w, r, snapshotRoute.FindStringSubmatch(p)[1])
	case sandboxRoute.MatchString(p):
		m := sandboxRoute.FindStringSubmatch(p)
		id, rest := m[1], m[2]
		if prefix := fmt.Sprintf("/proxy/%d", 44772); strings.HasPrefix(rest, prefix) {
			s.execdFor(w, r, id, strings.TrimPrefix(rest, prefix), false)
			return
		}
		s.sandboxOp(w, r, id, rest)
	default:
		writeError(w, http.StatusNotFound, "NOT_FOUND", "no route %s %s", r.Method, p)
	}
}

// view renders a sandbox; it reports the state after advancing transitions, as a
// controller reconciling in the background would have.
func (s *Server) view(sb *sandbox) map[string]any {
	out := map[string]any{
		"id":         sb.ID,
		"status":     map[string]string{"state": sb.State, "reason": sb.Reason, "message": sb.Message},
		"metadata":   sb.Metadata,
		"createdAt":  sb.Created.Format(time.RFC3339),
		"entrypoint": []string{"tail", "-f", "/dev/null"},
	}
	if !sb.ExpiresAt.IsZero() {
		out["expiresAt"] = sb.ExpiresAt.Format(time.RFC3339)
	}
	return out
}

// advance moves a sandbox one step through its asynchronous transitions.
func (s *Server) advance(sb *sandbox) {
	switch sb.State {
	case "Pending":
		if sb.pending--; sb.pending <= 0 {
			sb.State = "Running"
			if sb.fail != "" {
				sb.State, sb.Reason, sb.Message = "Failed", "runtime_error", sb.fail
			}
		}
	case "Pausing":
		sb.State = "Paused"
	case "Resuming":
		sb.State = "Running"
	case "Stopping":
		sb.State = "Terminated"
	}
}

func (s *Server) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	filter, err := url.ParseQuery(q.Get("metadata"))
	if err != nil {
		writeError(w, http.StatusBadRequest, "INVALID_REQUEST", "metadata filter: %v", err)
		return
	}
	page, _ := strconv.Atoi(q.Get("page"))
	size, _ := strconv.Atoi(q.Get("pageSize"))
	page, size = max(page, 1), max(size, 1)
	if size == 1 && q.Get("pageSize") == "" {
		size = 20
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var match []map[string]any
	for _, id := range s.order {
		sb := s.sandboxes[id]
		s.advance(sb)
		ok := true
		for k := range filter {
			ok = ok && sb.Metadata[k] == filter.Get(k)
		}
		if ok {
			match = append(match, s.view(sb))
		}
	}
	from, to := min((page-1)*size, len(match)), min(page*size, len(match))
	totalPages := (len(match) + size - 1) / size
	writeJSON(w, http.StatusOK, map[string]any{
		"items": append([]map[string]any{}, match[from:to]...),
		"pagination": map[string]any{"page": page, "pageSize": size, "totalItems": len(match),
			"totalPages": totalPages, "hasNextPage": page < totalPages},
	})
}

func (s *Server) create(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Image *struct {
			URI string `json:"uri"`
		} `json:"image"`
		SnapshotID     string            `json:"snapshotId"`
		Timeout        *int64            `json:"timeout"`
		ResourceLimits map[string]string `json:"resourceLimits"`
		Env            map[string]string `json:"env"`
		Metadata       map[string]string `json:"metadata"`
		Entrypoint     []string          `json:"entrypoint"`
	}
	var raw map[string]any
	dec := json.NewDecoder(r.Body)
	dec.UseNumber()
	if err := dec.Decode(&raw); err != nil {
		writeError(w, http.StatusBadRequest, "INVALID_REQUEST", "body: %v", err)
		return
	}
	b, _ := json.Marshal(raw)
	_ = json.Unmarshal(b, &body)
	switch {
	case (body.Image == nil) == (body.SnapshotID == ""):
		writeError(w, http.StatusBadRequest, "INVALID_REQUEST", "exactly one of image and snapshotId is required")
		return
	case body.Image != nil && (body.Image.URI == "" || len(body.Entrypoint) == 0):
		writeError(w, http.StatusBadRequest, "INVALID_REQUEST", "image needs a uri and an entrypoint")
		return
	case body.ResourceLimits == nil:
		writeError(w, http.StatusBadRequest, "INVALID_REQUEST", "resourceLimits is required")
		return
	case body.Timeout != nil && *body.Timeout < 60:
		writeError(w, http.StatusBadRequest, "INVALID_REQUEST", "timeout must be at least 60")
		return
	}
	for k, v := range body.Metadata {
		if !metaValue.MatchString(v) || strings.HasPrefix(k, "opensandbox.io/") {
			writeError(w, http.StatusBadRequest, "INVALID_REQUEST", "metadata %q=%q breaks the label rules", k, v)
			return
		}
	}
	s.mu.Lock()
	s.creates = append(s.creates, raw)
	s.seq++
	id := fmt.Sprintf("osb-%04d", s.seq)
	sb := &sandbox{ID: id, State: "Pending", Metadata: body.Metadata, Env: body.Env, Created: time.Now(),
		Dir: filepath.Join(s.root, "sandboxes", id), Token: fmt.Sprintf("token-%s", id), pending: max(s.faults.PendingPolls, 1)}
	if sb.Metadata == nil {
		sb.Metadata = map[string]string{}
	}
	if body.Timeout != nil {
		sb.ExpiresAt = time.Now().Add(time.Duration(*body.Timeout) * time.Second)
	}
	var src string
	if body.SnapshotID != "" {
		snap := s.snapshots[body.SnapshotID]
		if snap == nil || snap.State != "Ready" {
			s.mu.Unlock()
			writeError(w, http.StatusNotFound, "NOT_FOUND", "snapshot %s not found", body.SnapshotID)
			return
		}
		src = snap.Dir
	} else if uri := body.Image.URI; strings.HasPrefix(uri, "fail/") {
		sb.fail = "image pull failed: " + uri
	}
	drop := s.faults.DropCreate > 0
	if drop {
		s.faults.DropCreate--
	}
	s.sandboxes[id] = sb
	s.order = append(s.order, id)
	s.mu.Unlock()
	if err := copyTree(src, sb.Dir); err != nil {
		writeError(w, http.StatusInternalServerError, "RUNTIME_ERROR", "%v", err)
		return
	}
	if drop {
		panic(http.ErrAbortHandler) // the sandbox exists, the answer is lost
	}
	s.mu.Lock()
	v := s.view(sb)
	s.mu.Unlock()
	writeJSON(w, http.StatusAccepted, v)
}

func (s *Server) sandboxOp(w http.ResponseWriter, r *http.Request, id, rest string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sb := s.sandboxes[id]
	if sb == nil || (sb.State == "Terminated" && r.Method != http.MethodGet) {
		writeError(w, http.StatusNotFound, "NOT_FOUND", "sandbox %s not found", id)
		return
	}
	switch {
	case rest == "" && r.Method == http.MethodGet:
		s.advance(sb)
		writeJSON(w, http.StatusOK, s.view(sb))
	case rest == "" && r.Method == http.MethodDelete:
		if sb.State == "Stopping" {
			writeError(w, http.StatusConflict, "CONFLICT", "sandbox %s is already stopping", id)
			return
		}
		sb.State = "Stopping"
		_ = os.RemoveAll(sb.Dir)
		w.WriteHeader(http.StatusNoContent)
	case rest == "/pause" && r.Method == http.MethodPost:
		if sb.State != "Running" {
			writeError(w, http.StatusConflict, "CONFLICT", "sandbox %s is %s", id, sb.State)
			return
		}
		sb.State = "Pausing"
		w.WriteHeader(http.StatusAccepted)
	case rest == "/resume" && r.Method == http.MethodPost:
		if sb.State != "Paused" {
			writeError(w, http.StatusConflict, "CONFLICT", "sandbox %s is %s", id, sb.State)
			return
		}
		sb.State = "Resuming"
		w.WriteHeader(http.StatusAccepted)
	case rest == "/renew-expiration" && r.Method == http.MethodPost:
		var body struct {
			ExpiresAt time.Time `json:"expiresAt"`
		}
		if sb.ExpiresAt.IsZero() {
			// A sandbox created without a timeout has no expiry to renew: the
			// server answers the route's 409 rather than giving it one.
			writeError(w, http.StatusConflict, "INVALID_EXPIRATION", "sandbox %s does not have automatic expiration enabled", id)
			return
		}
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil || !body.ExpiresAt.After(time.Now()) ||
			!body.ExpiresAt.After(sb.ExpiresAt) {
			writeError(w, http.StatusBadRequest, "INVALID_REQUEST", "expiresAt must be in the future and after the current one")
			return
		}
		sb.ExpiresAt = body.ExpiresAt
		writeJSON(w, http.StatusOK, map[string]string{"expiresAt": body.ExpiresAt.UTC().Format(time.RFC3339)})
	case strings.HasPrefix(rest, "/endpoints/") && r.Method == http.MethodGet:
		s.endpoint(w, r, sb, strings.TrimPrefix(rest, "/endpoints/"))
	case rest == "/snapshots" && r.Method == http.MethodPost:
		if sb.State != "Running" {
			writeError(w, http.StatusConflict, "CONFLICT", "sandbox %s is %s", id, sb.State)
			return
		}
		s.seq++
		snap := &snapshot{ID: fmt.Sprintf("snap-%04d", s.seq), SandboxID: id, State: "Creating",
			Dir: filepath.Join(s.root, "snapshots", fmt.Sprint(s.seq)), Created: time.Now()}
		if err := copyTree(sb.Dir, snap.Dir); err != nil {
			writeError(w, http.StatusInternalServerError, "RUNTIME_ERROR", "%v", err)
			return
		}
		s.snapshots[snap.ID] = snap
		writeJSON(w, http.StatusAccepted, snapshotView(snap))
	default:
		writeError(w, http.StatusNotFound, "NOT_FOUND", "no route %s %s", r.Method, r.URL.Path)
	}
}

func (s *Server) endpoint(w http.ResponseWriter, r *http.Request, sb *sandbox, portText string) {
	port, err := strconv.Atoi(portText)
	if err != nil || port < 1 || port > 65535 {
		writeError(w, http.StatusBadRequest, "INVALID_REQUEST", "bad port %q", portText)
		return
	}
	host := strings.TrimPrefix(s.execd.URL, "http://")
	if port == 44772 {
		// Reported without a scheme, with the execd token to send.
		writeJSON(w, http.StatusOK, map[string]any{"endpoint": host + "/execd/" + sb.ID,
			"headers": map[string]string{"X-EXECD-ACCESS-TOKEN": sb.Token}})
		return
	}
	if exp := r.URL.Query().Get("expires"); exp != "" {
		writeJSON(w, http.StatusOK, map[string]any{"endpoint": fmt.Sprintf("%s/route/%s/%d/%s/signature", host, sb.ID, port, exp)})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"endpoint": fmt.Sprintf("%s/sandboxes/%s/port/%d", host, sb.ID, port),
		"headers": map[string]string{"OPEN-SANDBOX-API-KEY": s.key}})
}

func snapshotView(sn *snapshot) map[string]any {
	return map[string]any{"id": sn.ID, "sandboxId": sn.SandboxID, "status": map[string]string{"state": sn.State},
		"createdAt": sn.Created.Format(time.RFC3339)}
}

func (s *Server) snapshotOp(w http.ResponseWriter, r *http.Request, id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sn := s.snapshots[id]
	if sn == nil {
		writeError(w, http.StatusNotFound, "NOT_FOUND", "snapshot %s not found", id)
		return
	}
	switch r.Method {
	case http.MethodGet:
		if sn.State == "Creating" {
			sn.State = "Ready"
		}
		writeJSON(w, http.StatusOK, snapshotView(sn))
	case http.MethodDelete:
		if sn.State == "Creating" {
			writeError(w, http.StatusConflict, "CONFLICT", "snapshot %s is still being created", id)
			return
		}
		delete(s.snapshots, id)
		_ = os.RemoveAll(sn.Dir)
		w.WriteHeader(http.StatusNoContent)
	default:
		writeError(w, http.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED", "%s", r.Method)
	}
}

// copyTree copies src (when set) to a new directory dst.
func copyTree(src, dst string) error {
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	if src == "" {
		return nil
	}
	return os.CopyFS(dst, os.DirFS(src))
}
