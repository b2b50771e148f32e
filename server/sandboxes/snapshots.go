package sandboxes

import (
	"context"
	"fmt"
	"maps"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/internal/ids"
	"github.com/different-ai/differently/server/store"
)

// snapshotStates are the states a sandbox can be captured in; whether the backend can
// capture a stopped or paused instance is the adapter's to say (invalid_state if
// not).
var snapshotStates = []store.State{store.StateRunning, store.StateStopped, store.StatePaused}

// Snapshot returns a snapshot the caller may see; another project's answers like a
// missing one.
func (s *Service) Snapshot(ctx context.Context, c Caller, id string) (store.Snapshot, error) {
	sn, err := s.st.GetSnapshot(ctx, id)
	if api.IsCode(err, api.CodeNotFound) {
		return sn, notFound("snapshot", id)
	}
	if err != nil {
		return sn, fmt.Errorf("get snapshot %s: %w", id, err)
	}
	if !c.Owns(sn.Org, sn.Project) {
		return store.Snapshot{}, notFound("snapshot", id)
	}
	return sn, nil
}

// Snapshots lists the snapshots of a sandbox the caller may see.
func (s *Service) Snapshots(ctx context.Context, c Caller, sandboxID string) ([]store.Snapshot, error) {
	if _, err := s.Sandbox(ctx, c, sandboxID); err != nil {
		return nil, err
	}
	return s.st.ListSnapshots(ctx, sandboxID)
}

func snapshotFeature(kind adapters.SnapshotKind) string {
	if kind == adapters.SnapshotMemory {
		return adapters.FeatureSnapshotsMemory
	}
	return adapters.FeatureSnapshotsDisk
}

// CreateSnapshot captures a sandbox's instance and records it. kind is "disk" or
// "memory"; nil is disk.
func (s *Service) CreateSnapshot(ctx context.Context, c Caller, id string, kind *string) (store.Snapshot, error) {
	k := adapters.SnapshotDisk
	if kind != nil {
		k = adapters.SnapshotKind(*kind)
	}
	if err := k.Validate(); err != nil {
		return store.Snapshot{}, err
	}
	op := "snapshot." + string(k)
	t, err := s.operate(ctx, c, id, op, snapshotFeature(k), snapshotStates...)
	if err != nil {
		return store.Snapshot{}, err
	}
	return s.takeSnapshot(ctx, t, op, k)
}

// takeSnapshot captures t's instance and records it. If recording fails the backend
// snapshot is deleted again, so nothing is left that no record points to.
func (s *Service) takeSnapshot(ctx context.Context, t target, op string, kind adapters.SnapshotKind) (store.Snapshot, error) {
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
		return store.Snapshot{}, fmt.Errorf("record snapshot: %w", err)
	}
	return out, nil
}

// DeleteSnapshot removes the backend snapshot first and the record after, so a
// failure in between leaves a record to retry with rather than a backend snapshot
// nobody knows. A pool without an adapter cannot delete it: provider_unavailable,
// and the record stays.
func (s *Service) DeleteSnapshot(ctx context.Context, c Caller, id string) error {
	sn, err := s.Snapshot(ctx, c, id)
	if err != nil {
		return err
	}
	const op = "snapshot.delete"
	v, err := s.poolView(c, sn.Pool)
	if err != nil {
		return err
	}
	sh, err := optional[adapters.Snapshotter](target{view: v}, op)
	if err != nil {
		return err
	}
	if err := sh.DeleteSnapshot(ctx, sn.BackendRef); err != nil {
		return adapterError(err, op, v)
	}
	if err := s.st.DeleteSnapshot(ctx, id); err != nil && !api.IsCode(err, api.CodeNotFound) {
		return err
	}
	return nil
}

// ForkRequest is what a fork may change of the copy; nil fields keep the source's
// (Kind: disk when the pool has it, memory otherwise).
type ForkRequest struct {
	Kind       *string
	Labels     *map[string]string
	TTLSeconds *int64
}

// Fork snapshots a sandbox and queues a copy restored from the snapshot, pinned to
// the source's pool (snapshots restore on the adapter that took them). The copy
// keeps template, profile, resources, capabilities, env, labels and TTL; the
// request's labels and TTL replace theirs.
func (s *Service) Fork(ctx context.Context, c Caller, id string, req ForkRequest) (store.Sandbox, error) {
	const op = "fork"
	t, err := s.operate(ctx, c, id, op, adapters.FeatureFork, snapshotStates...)
	if err != nil {
		return store.Sandbox{}, err
	}
	kind := adapters.SnapshotMemory
	if t.view.Supports(adapters.FeatureSnapshotsDisk) {
		kind = adapters.SnapshotDisk
	}
	if req.Kind != nil {
		kind = adapters.SnapshotKind(*req.Kind)
	}
	if err := kind.Validate(); err != nil {
		return store.Sandbox{}, err
	}
	if !t.view.Supports(snapshotFeature(kind)) {
		return store.Sandbox{}, unsupported(op, t.view).WithDetail("kind", string(kind))
	}
	src := t.sb
	child := store.Sandbox{
		Org: src.Org, Project: src.Project, Template: src.Template, Profile: src.Profile,
		Capabilities: src.Capabilities, Resources: src.Resources,
		Labels: maps.Clone(src.Labels), Env: maps.Clone(src.Env), TTLSeconds: src.TTLSeconds,
		Placement: store.Placement{AllowedPools: []string{src.Pool}},
	}
	if req.Labels != nil {
		child.Labels = maps.Clone(*req.Labels)
	}
	if req.TTLSeconds != nil {
		child.TTLSeconds = *req.TTLSeconds
	}
	// Validate the child before taking a snapshot it could never use.
	if err := adapters.ValidateLabels(child.Labels); err != nil {
		return store.Sandbox{}, err
	}
	if err := checkTTL(child.TTLSeconds); err != nil {
		return store.Sandbox{}, err
	}
	sn, err := s.takeSnapshot(ctx, t, op, kind)
	if err != nil {
		return store.Sandbox{}, err
	}
	child.FromSnapshot = sn.ID
	out, _, _, err := s.create(ctx, c, child, src.Pool, false)
	return out, err
}
