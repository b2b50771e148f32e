package devhost

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/internal/ids"
)

const snapshotFile = "snapshot.json"

// snapshotMeta is the record of one snapshot; like meta.json it is written last, so
// its presence means the copied tree is complete.
type snapshotMeta struct {
	Ref       string                `json:"ref"`
	Kind      adapters.SnapshotKind `json:"kind"`
	SandboxID string                `json:"sandboxId"`
	SizeBytes int64                 `json:"sizeBytes"`
	CreatedAt time.Time             `json:"createdAt"`
}

// readSnapshotMeta returns the record of a snapshot, or invalid_request when there is
// no such snapshot: a Create that names one can never succeed.
func (a *Adapter) readSnapshotMeta(ref string) (*snapshotMeta, error) {
	missing := adapters.InvalidRequest("devhost: snapshot %q does not exist", ref)
	if !validID(ref) {
		return nil, missing
	}
	b, err := os.ReadFile(filepath.Join(a.snapshotsDir(), ref, snapshotFile))
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return nil, missing
	}
	if err != nil {
		return nil, adapters.Unavailable("devhost: read snapshot %s: %v", ref, err)
	}
	var m snapshotMeta
	if json.Unmarshal(b, &m) != nil || m.Ref != ref {
		return nil, missing
	}
	return &m, nil
}

// Snapshot implements adapters.Snapshotter. Only disk snapshots exist here: there is
// no memory to capture, the "instance" being a directory.
func (a *Adapter) Snapshot(ctx context.Context, ref string, kind adapters.SnapshotKind) (_ adapters.Snapshot, err error) {
	defer a.rename(&err)
	if err := kind.Validate(); err != nil {
		return adapters.Snapshot{}, err
	}
	if kind == adapters.SnapshotMemory {
		return adapters.Snapshot{}, adapters.Unsupported("snapshots.memory")
	}
	if !validID(ref) {
		return adapters.Snapshot{}, adapters.NotFound("devhost: instance %q not found", ref)
	}
	if err := ctx.Err(); err != nil {
		return adapters.Snapshot{}, contextError(err)
	}
	unlock := a.locks.lock("sbx:" + ref)
	defer unlock()
	if _, err := a.loadMeta(ref); err != nil {
		return adapters.Snapshot{}, err
	}

	now := a.now()
	m := &snapshotMeta{Ref: ids.At("snap", now), Kind: adapters.SnapshotDisk, SandboxID: ref, CreatedAt: now.UTC()}
	stage := stagingName(a.snapshotsDir(), m.Ref)
	err = os.Mkdir(stage, 0o700)
	if err == nil {
		m.SizeBytes, err = copyTree(a.fsDir(ref), filepath.Join(stage, "fs"))
	}
	if err == nil {
		err = writeJSONAtomic(stage, snapshotFile, m, 0o600)
	}
	if err == nil {
		err = os.Rename(stage, filepath.Join(a.snapshotsDir(), m.Ref))
	}
	if err != nil {
		_ = removeTree(stage)
		return adapters.Snapshot{}, adapters.Unavailable("devhost: snapshot %s: %v", ref, err)
	}
	return adapters.Snapshot{Ref: m.Ref, Kind: m.Kind, SizeBytes: m.SizeBytes}, nil
}

// DeleteSnapshot implements adapters.Snapshotter.
func (a *Adapter) DeleteSnapshot(_ context.Context, snapshotRef string) (err error) {
	defer a.rename(&err)
	if !validID(snapshotRef) {
		return nil // names no snapshot, so there is nothing to delete
	}
	unlock := a.locks.lock("snap:" + snapshotRef)
	defer unlock()
	dir := filepath.Join(a.snapshotsDir(), snapshotRef)
	// Record first, as in Delete: a half-removed snapshot must not look restorable.
	if err := os.Remove(filepath.Join(dir, snapshotFile)); err != nil && !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR) {
		return adapters.Unavailable("devhost: delete snapshot %s: %v", snapshotRef, err)
	}
	if err := removeTree(dir); err != nil {
		return adapters.Unavailable("devhost: delete snapshot %s: %v", snapshotRef, err)
	}
	return nil
}

// copyTree copies the tree at src to dst (which must not exist), the way cp -a
// would for what a sandbox normally holds: directories, regular files with their
// modes and modification times, and symlinks as symlinks (never followed). FIFOs,
// sockets and devices are skipped: they carry no data, and opening a FIFO could
// block. It returns the bytes of regular file content copied.
//
// The tree is a live sandbox's: what vanishes between being listed and being read
// (a file its command deleted, WriteFile's temporary file renamed into place) is
// left out, as a snapshot taken a moment later would have it.
func copyTree(src, dst string) (int64, error) {
	type dirAttr struct {
		path  string
		mode  fs.FileMode
		mtime time.Time
	}
	var dirs []dirAttr
	var size int64
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return vanished(p, src, err)
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		info, err := d.Info()
		if err != nil {
			return vanished(p, src, err)
		}
		switch {
		case d.IsDir():
			// Owner-writable while being filled; the real mode is set afterwards,
			// so read-only directories can be copied too.
			if err := os.Mkdir(target, 0o700); err != nil {
				return err
			}
			dirs = append(dirs, dirAttr{target, info.Mode(), info.ModTime()})
		case d.Type()&fs.ModeSymlink != 0:
			link, err := os.Readlink(p)
			if err != nil {
				return vanished(p, src, err)
			}
			return os.Symlink(link, target)
		case d.Type().IsRegular():
			n, err := copyFile(p, target, info)
			size += n
			return err
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	// Children before parents, so no directory turns read-only while still written.
	for _, d := range slices.Backward(dirs) {
		if err := os.Chmod(d.path, modeBits(d.mode)); err != nil {
			return 0, err
		}
		if err := os.Chtimes(d.path, time.Time{}, d.mtime); err != nil {
			return 0, err
		}
	}
	return size, nil
}

// vanished is nil for an entry below root that no longer exists, and err otherwise.
func vanished(p, root string, err error) error {
	if err != nil && errors.Is(err, fs.ErrNotExist) && p != root {
		return nil
	}
	return err
}

func copyFile(src, dst string, info fs.FileInfo) (int64, error) {
	// O_NOFOLLOW and O_NONBLOCK: the sandbox may swap the file for a symlink or a
	// FIFO between the walk and the open.
	in, err := os.OpenFile(src, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil // deleted since it was listed: see copyTree
	}
	if err != nil {
		return 0, err
	}
	defer in.Close()
	if fi, err := in.Stat(); err != nil {
		return 0, err
	} else if !fi.Mode().IsRegular() {
		return 0, nil
	}
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return 0, err
	}
	n, err := io.Copy(out, in)
	if err == nil {
		err = out.Chmod(modeBits(info.Mode()))
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chtimes(dst, time.Time{}, info.ModTime())
	}
	return n, err
}

func modeBits(m fs.FileMode) fs.FileMode {
	return m & (fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky)
}
