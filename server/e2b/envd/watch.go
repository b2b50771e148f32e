package envd

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"path"
	"slices"
	"sync"
	"time"

	"connectrpc.com/connect"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/server/e2b/envd/gen/filesystempb"
	"github.com/different-ai/differently/server/sandboxes"
)

// Directory watches. envd watches with inotify; the adapter contract has no such
// thing, so the front door polls: it lists the directory (and, recursively, its
// subdirectories) every Options.WatchInterval through the same file listing as
// ListDir, and turns the difference between two listings into envd's events. What
// that can and cannot tell is in diffSnapshots.

// Watch bounds. A recursive watch lists every directory of its tree on each poll;
// these keep a poll's cost, and a watcher's memory, bounded.
const (
	// maxWatchDirs bounds the directories a recursive watch lists per poll.
	maxWatchDirs = 256
	// maxWatchEntries bounds the entries a watch keeps in its snapshot.
	maxWatchEntries = 20_000
	// maxPendingEvents bounds the events a non-streaming watcher holds for
	// GetWatcherEvents; past it the watcher fails rather than drop some silently.
	maxPendingEvents = 10_000
	// watcherIdle is how long a non-streaming watcher lives without a
	// GetWatcherEvents: a client that forgot RemoveWatcher does not hold its slot
	// for ever.
	watcherIdle = 10 * time.Minute
)

// Watch defaults of Options.
const (
	DefaultWatchInterval    = time.Second
	DefaultMaxWatchers      = 8
	DefaultMaxWatchersTotal = 256
)

var errShuttingDown = errors.New("the envd front door is shutting down")

// snapshot is what one poll saw: entries by path relative to the watched root, the
// names envd's events carry.
type snapshot map[string]adapters.FileInfo

// watchSpec is one watch's target.
type watchSpec struct {
	caller    sandboxes.Caller
	sandbox   string
	root      string
	recursive bool
	entries   bool // include_entry
}

// scan lists spec's root, and its tree when recursive, within the watch bounds.
func (h *Handler) scan(ctx context.Context, spec watchSpec) (snapshot, error) {
	snap := snapshot{}
	type dir struct{ rel, abs string }
	dirs := []dir{{"", spec.root}}
	listed := 0
	for len(dirs) > 0 {
		d := dirs[0]
		dirs = dirs[1:]
		if listed++; listed > maxWatchDirs {
			return nil, connect.NewError(connect.CodeResourceExhausted, fmt.Errorf(
				"%s holds over %d directories; a recursive watch polls each of them, so watch a smaller tree", spec.root, maxWatchDirs))
		}
		items, err := h.svc.ListFiles(ctx, spec.caller, spec.sandbox, d.abs)
		if err != nil {
			if d.rel != "" && api.IsCode(err, api.CodeNotFound) {
				// Removed between its parent's listing and its own: the next poll
				// sees it gone.
				continue
			}
			if api.IsCode(err, api.CodeNotFound) {
				return nil, notFound(spec.root)
			}
			return nil, connectError(err)
		}
		for _, fi := range items {
			if fi.Name == "" || fi.Name == "." || fi.Name == ".." {
				continue
			}
			rel := path.Join(d.rel, fi.Name)
			fi.Path = path.Join(d.abs, fi.Name) // as entryOf has it
			snap[rel] = fi
			if len(snap) > maxWatchEntries {
				return nil, connect.NewError(connect.CodeResourceExhausted, fmt.Errorf(
					"%s holds over %d entries, more than a watch keeps", spec.root, maxWatchEntries))
			}
			if fi.IsDir && spec.recursive {
				dirs = append(dirs, dir{rel, fi.Path})
			}
		}
	}
	return snap, nil
}

// startWatch checks that spec's root is a directory and takes the first snapshot,
// against which the first poll compares.
func (h *Handler) startWatch(ctx context.Context, spec watchSpec) (snapshot, error) {
	if spec.root == "" {
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("a path is required"))
	}
	e, err := h.stat(ctx, spec.caller, spec.sandbox, spec.root)
	if err != nil {
		return nil, err
	}
	if e.Type != filesystempb.FileType_FILE_TYPE_DIRECTORY {
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("path %s is not a directory", spec.root))
	}
	return h.scan(ctx, spec)
}

// diffSnapshots is what changed from old to cur, as envd's events, in a stable
// order: renames and removals, then creations, then writes and mode changes, each
// by name.
//
// Polling sees states, not operations, so:
//   - an entry that appears is a create and one that disappears a remove; one that
//     is created and removed between two polls is not seen at all;
//   - a file whose size or modification time changed is one write, however many
//     writes made the change; a write that leaves both as they were is not seen;
//   - a changed mode is a chmod; an entry that changed between file and directory
//     is a remove and a create;
//   - a rename is told as envd tells it (a rename of the old name, then a create
//     of the new) when exactly one entry disappeared and exactly one appeared with
//     the same type, size, mode and modification time (which a rename keeps);
//     otherwise it is a remove and a create. A remove and a create of identical
//     files between two polls is taken for a rename.
//   - a directory's own modification time changes with its entries and is not an
//     event; the changes of its entries are.
func diffSnapshots(old, cur snapshot) []*filesystempb.FilesystemEvent {
	var removed, created, changed []string
	for name, o := range old {
		c, ok := cur[name]
		switch {
		case !ok:
			removed = append(removed, name)
		case c.IsDir != o.IsDir:
			removed = append(removed, name)
			created = append(created, name)
		default:
			changed = append(changed, name)
		}
	}
	for name := range cur {
		if _, ok := old[name]; !ok {
			created = append(created, name)
		}
	}
	slices.Sort(removed)
	slices.Sort(created)
	slices.Sort(changed)

	// A rename keeps what identifies the content; pair removals with creations
	// that match one to one.
	key := func(fi adapters.FileInfo) string {
		return fmt.Sprintf("%t/%d/%o/%d", fi.IsDir, fi.Size, fi.Mode, fi.ModTime.UnixNano())
	}
	// Only entries whose name is new, or gone, pair: a type change is not half of a
	// rename.
	count := func(names []string, s, other snapshot) map[string]int {
		n := map[string]int{}
		for _, name := range names {
			if _, both := other[name]; !both && !s[name].ModTime.IsZero() {
				n[key(s[name])]++
			}
		}
		return n
	}
	gone, came := count(removed, old, cur), count(created, cur, old)

	var out []*filesystempb.FilesystemEvent
	ev := func(name string, t filesystempb.EventType) {
		out = append(out, &filesystempb.FilesystemEvent{Name: name, Type: t})
	}
	for _, name := range removed {
		fi := old[name]
		_, still := cur[name] // a type change, not a rename
		if k := key(fi); !still && !fi.ModTime.IsZero() && gone[k] == 1 && came[k] == 1 {
			ev(name, filesystempb.EventType_EVENT_TYPE_RENAME)
		} else {
			ev(name, filesystempb.EventType_EVENT_TYPE_REMOVE)
		}
	}
	for _, name := range created {
		ev(name, filesystempb.EventType_EVENT_TYPE_CREATE)
	}
	for _, name := range changed {
		o, c := old[name], cur[name]
		if !c.IsDir && (o.Size != c.Size || !o.ModTime.Equal(c.ModTime)) {
			ev(name, filesystempb.EventType_EVENT_TYPE_WRITE)
		}
		if o.Mode != c.Mode {
			ev(name, filesystempb.EventType_EVENT_TYPE_CHMOD)
		}
	}
	return out
}

// poll takes a new snapshot and returns the events since snap, with the entries
// of those whose entry still exists when spec asks for them.
func (h *Handler) poll(ctx context.Context, spec watchSpec, snap snapshot) ([]*filesystempb.FilesystemEvent, snapshot, error) {
	cur, err := h.scan(ctx, spec)
	if err != nil {
		return nil, snap, err
	}
	events := diffSnapshots(snap, cur)
	if spec.entries {
		for _, ev := range events {
			if fi, ok := cur[ev.Name]; ok && ev.Type != filesystempb.EventType_EVENT_TYPE_REMOVE && ev.Type != filesystempb.EventType_EVENT_TYPE_RENAME {
				ev.Entry = entryOf(fi, path.Dir(fi.Path))
			}
		}
	}
	return events, cur, nil
}

// watchRegistry bounds the watches of the handler and owns the goroutines of the
// non-streaming watchers (CreateWatcher). A streaming watch (WatchDir) polls on its
// request's goroutine, which the registry only cancels on close and waits for.
type watchRegistry struct {
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu         sync.Mutex
	closed     bool
	total      int
	perSandbox map[string]int
	byID       map[string]*watcher // non-streaming watchers, by sandbox and ID
}

func newWatchRegistry() *watchRegistry {
	ctx, cancel := context.WithCancel(context.Background())
	return &watchRegistry{ctx: ctx, cancel: cancel, perSandbox: map[string]int{}, byID: map[string]*watcher{}}
}

// acquire takes one of sandbox's watch slots and returns ctx cancelled also when
// the registry closes; done gives the slot back and must be called once.
func (r *watchRegistry) acquire(ctx context.Context, sandbox string, perSandbox, total int) (context.Context, func(), error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, nil, connect.NewError(connect.CodeUnavailable, errShuttingDown)
	}
	if r.perSandbox[sandbox] >= perSandbox {
		return nil, nil, connect.NewError(connect.CodeResourceExhausted, fmt.Errorf(
			"sandbox %s already has %d directory watches; stop one first", sandbox, r.perSandbox[sandbox]))
	}
	if r.total >= total {
		return nil, nil, connect.NewError(connect.CodeResourceExhausted, fmt.Errorf(
			"this server already serves %d directory watches", r.total))
	}
	r.perSandbox[sandbox]++
	r.total++
	r.wg.Add(1)
	ctx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(r.ctx, func() { cancel(errShuttingDown) })
	var once sync.Once
	return ctx, func() {
		once.Do(func() {
			stop()
			cancel(context.Canceled)
			r.mu.Lock()
			r.total--
			if r.perSandbox[sandbox]--; r.perSandbox[sandbox] <= 0 {
				delete(r.perSandbox, sandbox)
			}
			r.mu.Unlock()
			r.wg.Done()
		})
	}, nil
}

func (r *watchRegistry) close() {
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	r.cancel()
	r.wg.Wait()
}

func watcherKey(sandbox, id string) string { return sandbox + "/" + id }

// watcher is a non-streaming watch: its goroutine polls and queues events until
// RemoveWatcher, its idle time, or the registry's close.
type watcher struct {
	id   string
	stop context.CancelFunc
	done chan struct{}

	mu       sync.Mutex
	events   []*filesystempb.FilesystemEvent
	err      error // why polling stopped; told once the queued events are read
	lastRead time.Time
}

func newWatcherID() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return "w" + hex.EncodeToString(b)
}

// watchErr is how a watch's end is told: the registry's close as unavailable, the
// rest as they came.
func watchErr(ctx context.Context, err error) error {
	if cause := context.Cause(ctx); errors.Is(cause, errShuttingDown) {
		return connect.NewError(connect.CodeUnavailable, cause)
	}
	if ctx.Err() != nil {
		return connectError(ctx.Err())
	}
	return err
}

// runWatcher polls for w every tick of its ticker until ctx ends or w idles;
// done is acquire's.
func (h *Handler) runWatcher(ctx context.Context, w *watcher, spec watchSpec, snap snapshot, done func()) {
	tick, stopTick := h.newPollTicker(h.opts.WatchInterval)
	defer func() {
		stopTick()
		h.watches.mu.Lock()
		if h.watches.byID[watcherKey(spec.sandbox, w.id)] == w {
			delete(h.watches.byID, watcherKey(spec.sandbox, w.id))
		}
		h.watches.mu.Unlock()
		done()
		close(w.done)
	}()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick:
		}
		w.mu.Lock()
		idle, failed := h.clock.Now().Sub(w.lastRead) > watcherIdle, w.err != nil
		w.mu.Unlock()
		if idle {
			h.log.Info("envd: removing a directory watcher nobody reads", "sandbox", spec.sandbox, "watcher", w.id)
			return
		}
		if failed {
			// Kept, with its error, until read or idle.
			continue
		}
		events, next, err := h.poll(ctx, spec, snap)
		if ctx.Err() != nil {
			return
		}
		snap = next
		w.mu.Lock()
		switch {
		case err != nil:
			w.err = err
		case len(w.events)+len(events) > maxPendingEvents:
			w.err = connect.NewError(connect.CodeResourceExhausted, fmt.Errorf(
				"watcher %s has over %d events nobody read; it stopped watching", w.id, maxPendingEvents))
		default:
			w.events = append(w.events, events...)
		}
		w.mu.Unlock()
	}
}

// The requests of the watch RPCs.

func (s *filesystemService) watchSpec(ctx context.Context, hdr headerer, p string, recursive, entries bool) (watchSpec, error) {
	c, id, root, err := s.h.target(ctx, hdr.Header(), p)
	if err != nil {
		return watchSpec{}, err
	}
	return watchSpec{caller: c, sandbox: id, root: root, recursive: recursive, entries: entries}, nil
}

func (s *filesystemService) WatchDir(ctx context.Context, req *connect.Request[filesystempb.WatchDirRequest], stream *connect.ServerStream[filesystempb.WatchDirResponse]) error {
	h := s.h
	spec, err := s.watchSpec(ctx, req, req.Msg.Path, req.Msg.Recursive, req.Msg.IncludeEntry)
	if err != nil {
		return err
	}
	ctx, done, err := h.watches.acquire(ctx, spec.sandbox, h.opts.MaxWatchers, h.opts.MaxWatchersTotal)
	if err != nil {
		return err
	}
	defer done()
	snap, err := h.startWatch(ctx, spec)
	if err != nil {
		return watchErr(ctx, err)
	}
	if err := stream.Send(&filesystempb.WatchDirResponse{Event: &filesystempb.WatchDirResponse_Start{Start: &filesystempb.WatchDirResponse_StartEvent{}}}); err != nil {
		return err
	}
	tick, stopTick := h.newPollTicker(h.opts.WatchInterval)
	defer stopTick()
	keep, stopKeep := h.keepalive(req.Header())
	defer stopKeep()
	for {
		select {
		case <-ctx.Done():
			return watchErr(ctx, ctx.Err())
		case <-keep:
			if err := stream.Send(&filesystempb.WatchDirResponse{Event: &filesystempb.WatchDirResponse_Keepalive{Keepalive: &filesystempb.WatchDirResponse_KeepAlive{}}}); err != nil {
				return err
			}
		case <-tick:
			var events []*filesystempb.FilesystemEvent
			if events, snap, err = h.poll(ctx, spec, snap); err != nil {
				return watchErr(ctx, err)
			}
			for _, ev := range events {
				if err := stream.Send(&filesystempb.WatchDirResponse{Event: &filesystempb.WatchDirResponse_Filesystem{Filesystem: ev}}); err != nil {
					return err
				}
			}
		}
	}
}

func (s *filesystemService) CreateWatcher(ctx context.Context, req *connect.Request[filesystempb.CreateWatcherRequest]) (*connect.Response[filesystempb.CreateWatcherResponse], error) {
	h := s.h
	spec, err := s.watchSpec(ctx, req, req.Msg.Path, req.Msg.Recursive, req.Msg.IncludeEntry)
	if err != nil {
		return nil, err
	}
	// The watcher outlives this request, as envd's does.
	wctx, done, err := h.watches.acquire(context.WithoutCancel(ctx), spec.sandbox, h.opts.MaxWatchers, h.opts.MaxWatchersTotal)
	if err != nil {
		return nil, err
	}
	snap, err := h.startWatch(ctx, spec)
	if err != nil {
		err = watchErr(wctx, err)
		done()
		return nil, err
	}
	wctx, stop := context.WithCancel(wctx)
	w := &watcher{id: newWatcherID(), stop: stop, done: make(chan struct{}), lastRead: h.clock.Now()}
	h.watches.mu.Lock()
	h.watches.byID[watcherKey(spec.sandbox, w.id)] = w
	h.watches.mu.Unlock()
	go h.runWatcher(wctx, w, spec, snap, done)
	return connect.NewResponse(&filesystempb.CreateWatcherResponse{WatcherId: w.id}), nil
}

// findWatcher is sandbox's watcher id; another sandbox's is not found.
func (h *Handler) findWatcher(ctx context.Context, hdr headerer, id string) (*watcher, string, error) {
	_, sandbox, err := h.caller(ctx, hdr.Header())
	if err != nil {
		return nil, "", connectError(err)
	}
	h.watches.mu.Lock()
	w := h.watches.byID[watcherKey(sandbox, id)]
	h.watches.mu.Unlock()
	if w == nil {
		return nil, "", connect.NewError(connect.CodeNotFound, fmt.Errorf("watcher with id %s not found", id))
	}
	return w, sandbox, nil
}

func (s *filesystemService) GetWatcherEvents(ctx context.Context, req *connect.Request[filesystempb.GetWatcherEventsRequest]) (*connect.Response[filesystempb.GetWatcherEventsResponse], error) {
	w, _, err := s.h.findWatcher(ctx, req, req.Msg.WatcherId)
	if err != nil {
		return nil, err
	}
	now := s.h.clock.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	if now.Sub(w.lastRead) > watcherIdle {
		// Stopped, its goroutine removes it and gives its slot back.
		w.stop()
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("watcher with id %s not found: nobody read it for %v", w.id, watcherIdle))
	}
	w.lastRead = now
	events := w.events
	w.events = nil
	if len(events) == 0 && w.err != nil {
		return nil, w.err
	}
	return connect.NewResponse(&filesystempb.GetWatcherEventsResponse{Events: events}), nil
}

func (s *filesystemService) RemoveWatcher(ctx context.Context, req *connect.Request[filesystempb.RemoveWatcherRequest]) (*connect.Response[filesystempb.RemoveWatcherResponse], error) {
	w, _, err := s.h.findWatcher(ctx, req, req.Msg.WatcherId)
	if err != nil {
		return nil, err
	}
	w.stop()
	// Gone from the registry once its goroutine has ended: a GetWatcherEvents after
	// this answer finds nothing.
	<-w.done
	return connect.NewResponse(&filesystempb.RemoveWatcherResponse{}), nil
}

// headerer is a Connect request, for its headers.
type headerer interface{ Header() http.Header }
