// Package freestylefake is an in-memory Freestyle v5 API for tests, written from
// ../shared/specs/freestyle-v5-notes.md (the shapes of Freestyle's TypeScript SDK).
// It is not a simulation of Freestyle's internals: it keeps VMs in a map, and gives
// each VM a temporary directory that stands for its filesystem.
//
// What it does:
//   - Bearer auth; errors are {code, message} with SCREAMING_SNAKE codes. The 401
//     message quotes the presented key on purpose, so tests can check the adapter
//     never repeats a provider's message about credentials.
//   - VMs have ids, unique slugs (a duplicate answers 409), metadata (at most 64
//     entries of at most 63 characters), firewall and TLS rules, resources, a TTL.
//   - States move on the next read: a new or started VM is "starting" until the next
//     GET of it, a paused one "pausing", a powered-off one still "running". Polling
//     code is therefore exercised without any clock.
//   - List filters by state, slug, snapshotId and metadata (k:v,k2:v2) and pages
//     with limit and offset, answering totalCount.
//   - exec-await runs the command with the host's /bin/sh in the VM's directory.
//     Absolute paths under /tmp and /etc/differently, in commands and in the fs
//     endpoints, are mapped into the VM's directory, so two VMs never share files.
//     A timeout answers statusCode null. A command that mentions poweroff is never
//     run: the VM becomes stopped instead.
//   - TLS rules are listed by vmId and deleted by id; a VM's rules go with it unless
//     KeepTLSRules is set.
//   - Snapshots copy the VM's directory; a VM created from one starts with a copy.
//
// SetIntercept lets a test answer a request itself (a 429, a 5xx, a hang, a lost
// response) before the fake handles it.
package freestylefake

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Server is the fake API. Use New, then serve it with httptest.NewServer(s).
type Server struct {
	APIKey string
	// KeepTLSRules keeps a VM's TLS rules when the VM is deleted. The notes do not
	// say whether Freestyle removes them, so the adapter must not rely on it.
	KeepTLSRules bool
	root         string

	mu        sync.Mutex
	intercept func(http.ResponseWriter, *http.Request) bool
	seq       int
	vms       map[string]*VM // by id
	slugs     map[string]string
	snapshots map[string]*snapshot
	tls       map[string]TLSRule
	mux       *http.ServeMux
}

// VM is the fake's record of one VM. Tests read copies through VMs.
type VM struct {
	ID           string            `json:"id"`
	State        string            `json:"state"`
	Slug         string            `json:"slug,omitempty"`
	DisplayName  string            `json:"displayName,omitempty"`
	Resources    Resources         `json:"resources"`
	SnapshotID   string            `json:"snapshotId,omitempty"`
	Metadata     map[string]string `json:"metadata"`
	CreatedAt    time.Time         `json:"createdAt"`
	UpdatedAt    time.Time         `json:"updatedAt"`
	TTLSeconds   *int64            `json:"-"`
	IdleTimeout  *int64            `json:"-"`
	Firewall     []FirewallRule    `json:"-"`
	next         string            // state applied on the next read
	seq          int
	dir          string
	lastExecEnvs map[string]string
}

// Resources of a VM: cpu count, memory and storage in MiB.
type Resources struct {
	CPU     int64 `json:"cpu"`
	Memory  int64 `json:"memory"`
	Storage int64 `json:"storage"`
}

// FirewallRule as sent on create; the fake only stores it.
type FirewallRule struct {
	Action      string `json:"action"`
	Destination string `json:"destination,omitempty"`
}

// TLSRule routes a public domain to a VM port.
type TLSRule struct {
	ID     string `json:"id"`
	Action string `json:"action"`
	Domain string `json:"domain"`
	Source struct {
		Public bool `json:"public"`
	} `json:"source"`
	Destination struct {
		VMID string `json:"vmId"`
		Port int    `json:"port"`
	} `json:"destination"`
}

type snapshot struct {
	id, sourceVM, dir string
	resources         Resources
}

// DefaultResources are what a VM gets from the base image.
var DefaultResources = Resources{CPU: 2, Memory: 4096, Storage: 16384}

// New returns a fake accepting apiKey, keeping VM directories under a temporary
// directory that Close removes.
func New(apiKey string) (*Server, error) {
	root, err := os.MkdirTemp("", "freestylefake-")
	if err != nil {
		return nil, err
	}
	s := &Server{APIKey: apiKey, root: root, vms: map[string]*VM{}, slugs: map[string]string{},
		snapshots: map[string]*snapshot{}, tls: map[string]TLSRule{}}
	m := http.NewServeMux()
	m.HandleFunc("POST /v5/vms", s.createVM)
	m.HandleFunc("GET /v5/vms", s.listVMs)
	m.HandleFunc("GET /v5/vms/{id}", s.getVM)
	m.HandleFunc("PATCH /v5/vms/{id}", s.patchVM)
	m.HandleFunc("DELETE /v5/vms/{id}", s.deleteVM)
	m.HandleFunc("POST /v5/vms/{id}/start", s.start)
	m.HandleFunc("POST /v5/vms/{id}/pause", s.pause)
	m.HandleFunc("POST /v5/vms/{id}/resize", s.resize)
	m.HandleFunc("POST /v5/vms/{id}/exec-await", s.execAwait)
	m.HandleFunc("POST /v5/vms/{id}/snapshot", s.snapshot)
	m.HandleFunc("GET /v5/vms/{id}/fs/read", s.fsRead)
	m.HandleFunc("PUT /v5/vms/{id}/fs/write", s.fsWrite)
	m.HandleFunc("POST /v5/vms/{id}/fs/mkdir", s.fsMkdir)
	m.HandleFunc("GET /v5/vms/{id}/fs/dir", s.fsDir)
	m.HandleFunc("GET /v5/snapshots/{id}", s.getSnapshot)
	m.HandleFunc("DELETE /v5/snapshots/{id}", s.deleteSnapshot)
	m.HandleFunc("POST /v5/tls", s.createTLS)
	m.HandleFunc("GET /v5/tls", s.listTLS)
	m.HandleFunc("DELETE /v5/tls/{id}", s.deleteTLS)
	s.mux = m
	return s, nil
}

// Close removes every VM's and snapshot's directory.
func (s *Server) Close() error { return os.RemoveAll(s.root) }

// SetIntercept installs f, which sees every request first; when it returns true the
// request is answered. Nil removes it.
func (s *Server) SetIntercept(f func(http.ResponseWriter, *http.Request) bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.intercept = f
}

// ServeHTTP checks the key, offers the request to the intercept, then handles it.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	f := s.intercept
	s.mu.Unlock()
	if f != nil && f(w, r) {
		return
	}
	s.Handle(w, r)
}

// Handle serves r without the intercept: an intercept that wants the real effect of
// a request (and then to lose its answer) calls it with a recorder.
func (s *Server) Handle(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Authorization") != "Bearer "+s.APIKey {
		writeErr(w, http.StatusUnauthorized, "UNAUTHORIZED", "invalid API key: "+strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "))
		return
	}
	s.mux.ServeHTTP(w, r)
}

// VMs returns copies of every VM, in creation order.
func (s *Server) VMs() []VM {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]VM, 0, len(s.vms))
	for _, vm := range s.sortedLocked() {
		out = append(out, vm.copy())
	}
	return out
}

// TLSRules returns every TLS rule.
func (s *Server) TLSRules() []TLSRule {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]TLSRule, 0, len(s.tls))
	for _, r := range s.tls {
		out = append(out, r)
	}
	return out
}

// LastExecEnv returns the env field of the last exec-await on a VM.
func (s *Server) LastExecEnv(id string) map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if vm := s.vms[id]; vm != nil {
		return vm.lastExecEnvs
	}
	return nil
}

// Snapshots returns the ids of the stored snapshots.
func (s *Server) Snapshots() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.snapshots))
	for id := range s.snapshots {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

func (vm *VM) copy() VM {
	c := *vm
	c.Metadata = make(map[string]string, len(vm.Metadata))
	for k, v := range vm.Metadata {
		c.Metadata[k] = v
	}
	c.Firewall = slices.Clone(vm.Firewall)
	return c
}

func (s *Server) sortedLocked() []*VM {
	out := make([]*VM, 0, len(s.vms))
	for _, vm := range s.vms {
		out = append(out, vm)
	}
	slices.SortFunc(out, func(a, b *VM) int { return a.seq - b.seq })
	return out
}

func (s *Server) nextID(prefix string) string {
	s.seq++
	return fmt.Sprintf("%s%06d", prefix, s.seq)
}

// lookupLocked finds a VM by id or slug and applies a pending state change, as a
// read on the real service would observe it some time later.
func (s *Server) lookupLocked(idOrSlug string) *VM {
	vm := s.vms[idOrSlug]
	if vm == nil {
		vm = s.vms[s.slugs[idOrSlug]]
	}
	if vm != nil && vm.next != "" {
		vm.State, vm.next = vm.next, ""
		vm.UpdatedAt = time.Now()
	}
	return vm
}

// vmOr404 looks the path's VM up, answering 404 when it is missing. The caller
// holds s.mu.
func (s *Server) vmOr404(w http.ResponseWriter, r *http.Request) *VM {
	vm := s.lookupLocked(r.PathValue("id"))
	if vm == nil {
		writeErr(w, http.StatusNotFound, "VM_NOT_FOUND", "vm "+r.PathValue("id")+" not found")
	}
	return vm
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeErr(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, map[string]string{"code": code, "message": msg})
}

func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 8<<20)).Decode(v); err != nil {
		writeErr(w, http.StatusBadRequest, "BAD_REQUEST", "malformed body: "+err.Error())
		return false
	}
	return true
}

func atoiDefault(s string, def int) (int, error) {
	if s == "" {
		return def, nil
	}
	return strconv.Atoi(s)
}
