package freestylefake

import (
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

var slugRE = regexp.MustCompile(`^[a-z0-9-]{1,63}$`)

type createBody struct {
	SnapshotID         string            `json:"snapshotId"`
	Slug               string            `json:"slug"`
	DisplayName        string            `json:"displayName"`
	IdleTimeoutSeconds *int64            `json:"idleTimeoutSeconds"`
	TTLSeconds         *int64            `json:"ttlSeconds"`
	Metadata           map[string]string `json:"metadata"`
	Firewall           *struct {
		Rules []FirewallRule `json:"rules"`
	} `json:"firewall"`
	TLS *struct {
		Rules []TLSRule `json:"rules"`
	} `json:"tls"`
}

func (s *Server) createVM(w http.ResponseWriter, r *http.Request) {
	var b createBody
	if !decode(w, r, &b) {
		return
	}
	switch {
	case b.Firewall == nil:
		writeErr(w, http.StatusBadRequest, "BAD_REQUEST", "firewall is required")
		return
	case b.Slug != "" && !slugRE.MatchString(b.Slug):
		writeErr(w, http.StatusBadRequest, "INVALID_SLUG", "slug must be 1-63 of [a-z0-9-]")
		return
	case len(b.Metadata) > 64:
		writeErr(w, http.StatusBadRequest, "INVALID_METADATA", "at most 64 metadata entries")
		return
	}
	for k, v := range b.Metadata {
		if len(k) > 63 || len(v) > 63 {
			writeErr(w, http.StatusBadRequest, "INVALID_METADATA", "metadata keys and values are at most 63 characters")
			return
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, taken := s.slugs[b.Slug]; b.Slug != "" && taken {
		writeErr(w, http.StatusConflict, "SLUG_TAKEN", "slug "+b.Slug+" is already in use")
		return
	}
	res := DefaultResources
	var from string
	if b.SnapshotID != "" {
		snap := s.snapshots[b.SnapshotID]
		if snap == nil {
			writeErr(w, http.StatusNotFound, "SNAPSHOT_NOT_FOUND", "snapshot "+b.SnapshotID+" not found")
			return
		}
		res, from = snap.resources, snap.dir
	}
	id := s.nextID("vm")
	dir := filepath.Join(s.root, id)
	if err := prepareDir(dir, from); err != nil {
		writeErr(w, http.StatusInternalServerError, "INTERNAL", err.Error())
		return
	}
	now := time.Now()
	vm := &VM{ID: id, State: "starting", next: "running", Slug: b.Slug, DisplayName: b.DisplayName,
		Resources: res, SnapshotID: b.SnapshotID, Metadata: b.Metadata, CreatedAt: now, UpdatedAt: now,
		TTLSeconds: b.TTLSeconds, IdleTimeout: b.IdleTimeoutSeconds, Firewall: b.Firewall.Rules, seq: s.seq, dir: dir}
	if vm.Metadata == nil {
		vm.Metadata = map[string]string{}
	}
	s.vms[id] = vm
	if b.Slug != "" {
		s.slugs[b.Slug] = id
	}
	writeJSON(w, http.StatusOK, struct {
		*VM
		FirewallRules []FirewallRule `json:"firewallRules"`
		TLSRules      []TLSRule      `json:"tlsRules"`
	}{vm, vm.Firewall, []TLSRule{}})
}

// prepareDir makes a VM's filesystem: a copy of a snapshot, or the two directories
// the fake maps (/tmp and /etc).
func prepareDir(dir, from string) error {
	if from != "" {
		return copyTree(from, dir)
	}
	for _, d := range []string{"tmp", "etc"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return err
		}
	}
	return nil
}

func (s *Server) listVMs(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit, err1 := atoiDefault(q.Get("limit"), 50)
	offset, err2 := atoiDefault(q.Get("offset"), 0)
	if err1 != nil || err2 != nil || limit < 1 || limit > 100 || offset < 0 {
		writeErr(w, http.StatusBadRequest, "BAD_REQUEST", "limit is 1-100, offset at least 0")
		return
	}
	want := map[string]string{}
	if m := q.Get("metadata"); m != "" {
		for _, pair := range strings.Split(m, ",") {
			k, v, ok := strings.Cut(pair, ":")
			if !ok {
				writeErr(w, http.StatusBadRequest, "BAD_REQUEST", "metadata filter is k:v,k2:v2")
				return
			}
			want[k] = v
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var match []VM
	for _, vm := range s.sortedLocked() {
		s.lookupLocked(vm.ID)
		ok := (q.Get("state") == "" || vm.State == q.Get("state")) &&
			(q.Get("slug") == "" || vm.Slug == q.Get("slug")) &&
			(q.Get("snapshotId") == "" || vm.SnapshotID == q.Get("snapshotId"))
		for k, v := range want {
			ok = ok && vm.Metadata[k] == v
		}
		if ok {
			match = append(match, vm.copy())
		}
	}
	page := []VM{}
	if offset < len(match) {
		page = match[offset:min(offset+limit, len(match))]
	}
	writeJSON(w, http.StatusOK, map[string]any{"vms": page, "totalCount": len(match), "limit": limit, "offset": offset})
}

func (s *Server) getVM(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if vm := s.vmOr404(w, r); vm != nil {
		writeJSON(w, http.StatusOK, vm)
	}
}

func (s *Server) patchVM(w http.ResponseWriter, r *http.Request) {
	var b struct {
		TTLSeconds  *int64  `json:"ttlSeconds"`
		DisplayName *string `json:"displayName"`
	}
	if !decode(w, r, &b) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	vm := s.vmOr404(w, r)
	if vm == nil {
		return
	}
	vm.TTLSeconds = b.TTLSeconds
	if b.DisplayName != nil {
		vm.DisplayName = *b.DisplayName
	}
	vm.UpdatedAt = time.Now()
	writeJSON(w, http.StatusOK, vm)
}

func (s *Server) deleteVM(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	vm := s.vmOr404(w, r)
	if vm == nil {
		return
	}
	delete(s.vms, vm.ID)
	delete(s.slugs, vm.Slug)
	for id, rule := range s.tls {
		if rule.Destination.VMID == vm.ID && !s.KeepTLSRules {
			delete(s.tls, id)
		}
	}
	_ = os.RemoveAll(vm.dir)
	writeJSON(w, http.StatusOK, map[string]string{"id": vm.ID})
}

func (s *Server) start(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	vm := s.vmOr404(w, r)
	if vm == nil {
		return
	}
	switch vm.State {
	case "stopped":
		vm.State, vm.next = "starting", "running"
	case "paused", "pausing":
		vm.State, vm.next = "running", ""
	}
	writeJSON(w, http.StatusOK, vm)
}

func (s *Server) pause(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	vm := s.vmOr404(w, r)
	if vm == nil {
		return
	}
	switch vm.State {
	case "running":
		vm.State, vm.next = "pausing", "paused"
	case "paused", "pausing":
	default:
		writeErr(w, http.StatusConflict, "INVALID_STATE", "cannot pause a "+vm.State+" vm")
		return
	}
	writeJSON(w, http.StatusOK, vm)
}

func (s *Server) resize(w http.ResponseWriter, r *http.Request) {
	var b struct{ CPU, Memory, Storage *int64 }
	if !decode(w, r, &b) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	vm := s.vmOr404(w, r)
	if vm == nil {
		return
	}
	grow := func(cur *int64, want *int64) bool {
		if want == nil {
			return true
		}
		if *want < *cur {
			return false
		}
		*cur = *want
		return true
	}
	next := vm.Resources
	if !grow(&next.CPU, b.CPU) || !grow(&next.Memory, b.Memory) || !grow(&next.Storage, b.Storage) {
		writeErr(w, http.StatusBadRequest, "INVALID_RESIZE", "resources can only grow")
		return
	}
	vm.Resources = next
	writeJSON(w, http.StatusOK, vm)
}

func (s *Server) snapshot(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	vm := s.vmOr404(w, r)
	if vm == nil {
		return
	}
	id := s.nextID("sn")
	dir := filepath.Join(s.root, id)
	if err := copyTree(vm.dir, dir); err != nil {
		writeErr(w, http.StatusInternalServerError, "INTERNAL", err.Error())
		return
	}
	s.snapshots[id] = &snapshot{id: id, sourceVM: vm.ID, dir: dir, resources: vm.Resources}
	writeJSON(w, http.StatusOK, map[string]any{"snapshotId": id, "sourceVmId": vm.ID,
		"snapshot": map[string]any{"id": id, "sourceVmId": vm.ID}})
}

func (s *Server) getSnapshot(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	snap := s.snapshots[r.PathValue("id")]
	if snap == nil {
		writeErr(w, http.StatusNotFound, "SNAPSHOT_NOT_FOUND", "snapshot not found")
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"id": snap.id, "sourceVmId": snap.sourceVM})
}

func (s *Server) deleteSnapshot(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	snap := s.snapshots[r.PathValue("id")]
	if snap == nil {
		writeErr(w, http.StatusNotFound, "SNAPSHOT_NOT_FOUND", "snapshot not found")
		return
	}
	delete(s.snapshots, snap.id)
	_ = os.RemoveAll(snap.dir)
	writeJSON(w, http.StatusOK, map[string]string{"id": snap.id})
}

func (s *Server) createTLS(w http.ResponseWriter, r *http.Request) {
	var rule TLSRule
	if !decode(w, r, &rule) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if rule.Action != "allow" || rule.Domain == "" || rule.Destination.Port < 1 || rule.Destination.Port > 65535 {
		writeErr(w, http.StatusBadRequest, "BAD_REQUEST", "a rule needs action allow, a domain and a port")
		return
	}
	if s.vms[rule.Destination.VMID] == nil {
		writeErr(w, http.StatusNotFound, "VM_NOT_FOUND", "vm not found")
		return
	}
	for _, have := range s.tls {
		if have.Domain == rule.Domain {
			writeErr(w, http.StatusConflict, "DOMAIN_TAKEN", "a rule for "+rule.Domain+" exists")
			return
		}
	}
	rule.ID = s.nextID("tls")
	s.tls[rule.ID] = rule
	writeJSON(w, http.StatusOK, rule)
}

func (s *Server) deleteTLS(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	id := r.PathValue("id")
	if _, ok := s.tls[id]; !ok {
		writeErr(w, http.StatusNotFound, "TLS_RULE_NOT_FOUND", "rule not found")
		return
	}
	delete(s.tls, id)
	writeJSON(w, http.StatusOK, map[string]string{"id": id})
}

func (s *Server) listTLS(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rules := []TLSRule{}
	for _, rule := range s.tls {
		if vmID := r.URL.Query().Get("vmId"); vmID == "" || rule.Destination.VMID == vmID {
			rules = append(rules, rule)
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"rules": rules})
}
