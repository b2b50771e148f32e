package httpapi

import (
	"context"
	"maps"
	"net/http"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/internal/ids"
	"github.com/different-ai/differently/server/store"
)

// snapshotStates are the states a sandbox can be captured in; whether the backend can
// capture a stopped or paused instance is the adapter's to say (409 if not).
var snapshotStates = []store.State{store.StateRunning, store.StateStopped, store.StatePaused}

// loadSnapshot returns a snapshot the caller may see; another project's answers like
// a missing one.
func (s *Server) loadSnapshot(ctx context.Context, id string) (store.Snapshot, error) {
	sn, err := s.st.GetSnapshot(ctx, id)
	if api.IsCode(err, api.CodeNotFound) {
		return sn, notFound("snapshot", id)
	}
	if err != nil {
		return sn, errorf("get snapshot %s: %w", id, err)
	}
	if !principalFrom(ctx).owns(sn.Org, sn.Project) {
		return store.Snapshot{}, notFound("snapshot", id)
	}
	return sn, nil
}

func snapshotFeature(kind adapters.SnapshotKind) string {
	if kind == adapters.SnapshotMemory {
		return adapters.FeatureSnapshotsMemory
	}
	return adapters.FeatureSnapshotsDisk
}

// takeSnapshot captures t's instance and records it. If recording fails the backend
// snapshot is deleted again, so nothing is left that no record points to.
func (s *Server) takeSnapshot(ctx context.Context, t target, op string, kind adapters.SnapshotKind) (store.Snapshot, error) {
	sh, err := optional[adapters.Snapshotter](t, op)
	if err != nil {
		return store.Snapshot{}, err
	}
	snap, err := sh.Snapshot(ctx, t.sb.BackendRef, kind)
	if err != nil {
		return store.Snapshot{}, adapterError(err, op, t.view)
	}
	if snap.Kind == "" {
		snap.Kind = kind
	}
	rec := store.Snapshot{
		ID: ids.New("snap"), SandboxID: t.sb.ID, Org: t.sb.Org, Project: t.sb.Project,
		Pool: t.sb.Pool, BackendRef: snap.Ref, Kind: string(snap.Kind), SizeBytes: snap.SizeBytes, State: "ready",
	}
	out, err := s.st.CreateSnapshot(ctx, s.now(), rec)
	if err != nil {
		if derr := sh.DeleteSnapshot(context.WithoutCancel(ctx), snap.Ref); derr != nil {
			s.log.Error("delete unrecorded snapshot", "pool", t.sb.Pool, "ref", snap.Ref, "error", derr)
		}
		return store.Snapshot{}, errorf("record snapshot: %w", err)
	}
	return out, nil
}

func (s *Server) CreateSnapshot(w http.ResponseWriter, r *http.Request, id SandboxID) {
	var body SnapshotCreate
	if err := decodeJSON(r, &body, true); err != nil {
		s.writeError(w, r, err)
		return
	}
	kind := adapters.SnapshotDisk
	if body.Kind != nil {
		kind = adapters.SnapshotKind(*body.Kind)
	}
	if err := kind.Validate(); err != nil {
		s.writeError(w, r, err)
		return
	}
	ctx := r.Context()
	op := "snapshot." + string(kind)
	t, err := s.operate(ctx, id, op, snapshotFeature(kind), snapshotStates...)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	sn, err := s.takeSnapshot(ctx, t, op, kind)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, toSnapshot(sn))
}

func (s *Server) ListSnapshots(w http.ResponseWriter, r *http.Request, id SandboxID) {
	ctx := r.Context()
	if _, err := s.loadSandbox(ctx, id); err != nil {
		s.writeError(w, r, err)
		return
	}
	items, err := s.st.ListSnapshots(ctx, id)
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

func (s *Server) GetSnapshot(w http.ResponseWriter, r *http.Request, id string) {
	sn, err := s.loadSnapshot(r.Context(), id)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, toSnapshot(sn))
}

// DeleteSnapshot removes the backend snapshot first and the record after, so a failure
// in between leaves a record to retry with rather than a backend snapshot nobody knows.
// A pool without an adapter cannot delete it: 503, and the record stays.
func (s *Server) DeleteSnapshot(w http.ResponseWriter, r *http.Request, id string) {
	ctx := r.Context()
	sn, err := s.loadSnapshot(ctx, id)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	const op = "snapshot.delete"
	v, err := s.poolView(ctx, sn.Pool)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	sh, err := optional[adapters.Snapshotter](target{view: v}, op)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := sh.DeleteSnapshot(ctx, sn.BackendRef); err != nil {
		s.writeError(w, r, adapterError(err, op, v))
		return
	}
	if err := s.st.DeleteSnapshot(ctx, id); err != nil && !api.IsCode(err, api.CodeNotFound) {
		s.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// ForkSandbox snapshots a sandbox and queues a copy restored from the snapshot, pinned
// to the source's pool (snapshots restore on the adapter that took them). The copy
// keeps template, resources, capabilities, env and labels; body labels replace them.
func (s *Server) ForkSandbox(w http.ResponseWriter, r *http.Request, id SandboxID) {
	var body ForkRequest
	if err := decodeJSON(r, &body, true); err != nil {
		s.writeError(w, r, err)
		return
	}
	ctx := r.Context()
	const op = "fork"
	t, err := s.operate(ctx, id, op, adapters.FeatureFork, snapshotStates...)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	kind := adapters.SnapshotMemory
	if t.view.Supports(adapters.FeatureSnapshotsDisk) {
		kind = adapters.SnapshotDisk
	}
	if body.Kind != nil {
		kind = adapters.SnapshotKind(*body.Kind)
	}
	if err := kind.Validate(); err != nil {
		s.writeError(w, r, err)
		return
	}
	if !t.view.Supports(snapshotFeature(kind)) {
		s.writeError(w, r, unsupported(op, t.view).WithDetail("kind", string(kind)))
		return
	}
	src := t.sb
	child := store.Sandbox{
		Org: src.Org, Project: src.Project, Template: src.Template, Profile: src.Profile,
		Capabilities: src.Capabilities, Resources: src.Resources,
		Labels: maps.Clone(src.Labels), Env: maps.Clone(src.Env), TTLSeconds: src.TTLSeconds,
		Placement: store.Placement{AllowedPools: []string{src.Pool}},
	}
	if body.Labels != nil {
		child.Labels = maps.Clone(*body.Labels)
	}
	if body.TtlSeconds != nil {
		child.TTLSeconds = *body.TtlSeconds
	}
	// Validate the child before taking a snapshot it could never use.
	if err := adapters.ValidateLabels(child.Labels); err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := checkTTL(child.TTLSeconds); err != nil {
		s.writeError(w, r, err)
		return
	}
	sn, err := s.takeSnapshot(ctx, t, op, kind)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	child.FromSnapshot = sn.ID
	out, _, _, err := s.queueSandbox(ctx, child, src.Pool, false)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusAccepted, s.toSandbox(out))
}
