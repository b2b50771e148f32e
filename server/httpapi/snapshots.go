package httpapi

import (
	"net/http"

	"github.com/different-ai/differently/server/sandboxes"
	"github.com/different-ai/differently/server/store"
)

func (s *Server) CreateSnapshot(w http.ResponseWriter, r *http.Request, id SandboxID) {
	var body SnapshotCreate
	if err := decodeJSON(r, &body, true); err != nil {
		s.writeError(w, r, err)
		return
	}
	ctx := r.Context()
	sn, err := s.svc.CreateSnapshot(ctx, callerOf(ctx), id, (*string)(body.Kind))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, toSnapshot(sn))
}

func (s *Server) ListSnapshots(w http.ResponseWriter, r *http.Request, id SandboxID) {
	ctx := r.Context()
	items, err := s.svc.Snapshots(ctx, callerOf(ctx), id)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := SnapshotList{Items: make([]Snapshot, 0, len(items))}
	for _, sn := range items {
		out.Items = append(out.Items, toSnapshot(sn))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) ListAllSnapshots(w http.ResponseWriter, r *http.Request, params ListAllSnapshotsParams) {
	f := store.SnapshotFilter{SandboxID: deref(params.Sandbox), Cursor: deref(params.Cursor)}
	var err error
	if f.Limit, err = pageLimit(params.Limit); err != nil {
		s.writeError(w, r, err)
		return
	}
	// The service confines a project token to its own project.
	f.Org, f.Project = projectParam(params.Project)
	ctx := r.Context()
	items, next, err := s.svc.SnapshotPage(ctx, callerOf(ctx), f)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := SnapshotList{Items: make([]Snapshot, 0, len(items)), NextCursor: strPtr(next)}
	for _, sn := range items {
		out.Items = append(out.Items, toSnapshot(sn))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) GetSnapshot(w http.ResponseWriter, r *http.Request, id string) {
	ctx := r.Context()
	sn, err := s.svc.Snapshot(ctx, callerOf(ctx), id)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, toSnapshot(sn))
}

// DeleteSnapshot deletes the backend snapshot and then its record (the service's
// DeleteSnapshot says why in that order).
func (s *Server) DeleteSnapshot(w http.ResponseWriter, r *http.Request, id string) {
	ctx := r.Context()
	if err := s.svc.DeleteSnapshot(ctx, callerOf(ctx), id); err != nil {
		s.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// ForkSandbox snapshots a sandbox and queues a copy restored from the snapshot (the
// service's Fork), answering 202 with the copy.
func (s *Server) ForkSandbox(w http.ResponseWriter, r *http.Request, id SandboxID) {
	var body ForkRequest
	if err := decodeJSON(r, &body, true); err != nil {
		s.writeError(w, r, err)
		return
	}
	ctx := r.Context()
	out, err := s.svc.Fork(ctx, callerOf(ctx), id, sandboxes.ForkRequest{
		Kind: (*string)(body.Kind), Labels: body.Labels, TTLSeconds: body.TtlSeconds,
	})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusAccepted, s.toSandbox(out))
}
