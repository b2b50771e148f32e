package envd_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/different-ai/differently/internal/clock"
	"github.com/different-ai/differently/server/e2b/envd"
	"github.com/different-ai/differently/server/e2b/envd/gen/filesystempb"
	"github.com/different-ai/differently/server/e2b/envd/gen/filesystempb/filesystempbconnect"
)

// pollTicks makes e's directory watches poll when the test says, through the
// returned channel. A send returns once a watch took the tick; a second send to a
// watch's goroutine returns only after it finished the first tick's poll.
func (e *env) pollTicks() chan<- time.Time {
	tick := make(chan time.Time)
	envd.SetPollTicker(e.handler, func(time.Duration) (<-chan time.Time, func()) { return tick, func() {} })
	return tick
}

func (e *env) put(p, content string) {
	e.t.Helper()
	if res, _ := e.upload("path="+p, map[string][]byte{"f": []byte(content)}); res.StatusCode != http.StatusOK {
		e.t.Fatalf("upload %s: %d", p, res.StatusCode)
	}
}

func eventString(ev *filesystempb.FilesystemEvent) string {
	return strings.TrimPrefix(ev.Type.String(), "EVENT_TYPE_") + ":" + ev.Name
}

// watchEvents reads n filesystem events of a WatchDir stream, skipping keepalives.
func watchEvents(t *testing.T, stream *connect.ServerStreamForClient[filesystempb.WatchDirResponse], n int) []*filesystempb.FilesystemEvent {
	t.Helper()
	var out []*filesystempb.FilesystemEvent
	for len(out) < n {
		if !stream.Receive() {
			t.Fatalf("the watch ended after %d events: %v", len(out), stream.Err())
		}
		if ev := stream.Msg().GetFilesystem(); ev != nil {
			out = append(out, ev)
		}
	}
	return out
}

func TestWatchDirStreamsChanges(t *testing.T) {
	e := newEnv(t)
	tick := e.pollTicks()
	e.put("w/keep.txt", "1")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stream, err := e.files().WatchDir(ctx, connect.NewRequest(&filesystempb.WatchDirRequest{Path: "w", IncludeEntry: true}))
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	if !stream.Receive() || stream.Msg().GetStart() == nil {
		t.Fatalf("first message %v (%v), want start", stream.Msg(), stream.Err())
	}

	// Each step changes the directory, polls once, and reads exactly the step's
	// events: one more than the poll found would be read as the next step's first.
	steps := []struct {
		name   string
		change func()
		want   string
	}{
		{"create", func() { e.put("w/new.txt", "22") }, "CREATE:new.txt"},
		{"nothing changed", func() {}, ""},
		{"write", func() { e.put("w/keep.txt", "333") }, "WRITE:keep.txt"},
		{"rename", func() {
			if _, err := e.files().Move(ctx, connect.NewRequest(&filesystempb.MoveRequest{Source: "w/new.txt", Destination: "w/moved.txt"})); err != nil {
				t.Fatal(err)
			}
		}, "RENAME:new.txt CREATE:moved.txt"},
		// Not recursive: the new directory is an event, its file is not.
		{"subdirectory", func() { e.put("w/sub/deep.txt", "4") }, "CREATE:sub"},
		{"remove", func() {
			if _, err := e.files().Remove(ctx, connect.NewRequest(&filesystempb.RemoveRequest{Path: "w/keep.txt"})); err != nil {
				t.Fatal(err)
			}
		}, "REMOVE:keep.txt"},
	}
	for _, step := range steps {
		step.change()
		tick <- time.Time{}
		if step.want == "" {
			continue
		}
		want := strings.Fields(step.want)
		var got []string
		for _, ev := range watchEvents(t, stream, len(want)) {
			got = append(got, eventString(ev))
			switch ev.Type {
			case filesystempb.EventType_EVENT_TYPE_REMOVE, filesystempb.EventType_EVENT_TYPE_RENAME:
				if ev.Entry != nil {
					t.Errorf("%s: %s has an entry, but its path is gone", step.name, eventString(ev))
				}
			default:
				if ev.Entry == nil || ev.Entry.Name != strings.TrimPrefix(ev.Name, "sub/") {
					t.Errorf("%s: %s has entry %v", step.name, eventString(ev), ev.Entry)
				}
			}
		}
		if strings.Join(got, " ") != step.want {
			t.Fatalf("%s: events %q, want %q", step.name, got, step.want)
		}
	}
}

func TestWatchDirRecursive(t *testing.T) {
	e := newEnv(t)
	tick := e.pollTicks()
	e.put("r/old/one.txt", "1")
	stream, err := e.files().WatchDir(context.Background(), connect.NewRequest(&filesystempb.WatchDirRequest{Path: "r", Recursive: true}))
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	if !stream.Receive() || stream.Msg().GetStart() == nil {
		t.Fatalf("first message %v (%v), want start", stream.Msg(), stream.Err())
	}
	e.put("r/old/two.txt", "2")
	e.put("r/new/deeper/three.txt", "3")
	tick <- time.Time{}
	var got []string
	for _, ev := range watchEvents(t, stream, 4) {
		got = append(got, eventString(ev))
		if ev.Entry != nil {
			t.Errorf("%s has an entry, which was not asked for", eventString(ev))
		}
	}
	want := "CREATE:new CREATE:new/deeper CREATE:new/deeper/three.txt CREATE:old/two.txt"
	if strings.Join(got, " ") != want {
		t.Fatalf("events %q, want %q", got, want)
	}
}

func TestWatchDirErrors(t *testing.T) {
	e := newEnv(t)
	e.put("f.txt", "1")
	tests := []struct {
		name string
		path string
		want connect.Code
	}{
		{"missing", "nope", connect.CodeNotFound},
		{"a file", "f.txt", connect.CodeInvalidArgument},
		{"no path", "", connect.CodeInvalidArgument},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stream, err := e.files().WatchDir(context.Background(), connect.NewRequest(&filesystempb.WatchDirRequest{Path: tt.path}))
			if err == nil {
				defer stream.Close()
				if stream.Receive() {
					t.Fatalf("sent %v", stream.Msg())
				}
				err = stream.Err()
			}
			if connect.CodeOf(err) != tt.want {
				t.Fatalf("watch: %v, want %v", err, tt.want)
			}
			_, err = e.files().CreateWatcher(context.Background(), connect.NewRequest(&filesystempb.CreateWatcherRequest{Path: tt.path}))
			if connect.CodeOf(err) != tt.want {
				t.Fatalf("create watcher: %v, want %v", err, tt.want)
			}
		})
	}
}

func TestWatcher(t *testing.T) {
	clk := clock.NewManual(time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC))
	e := newEnvWith(t, envd.Options{Clock: clk})
	tick := e.pollTicks()
	ctx := context.Background()
	fs := e.files()
	e.put("d/a.txt", "1")
	created, err := fs.CreateWatcher(ctx, connect.NewRequest(&filesystempb.CreateWatcherRequest{Path: "d", IncludeEntry: true}))
	if err != nil {
		t.Fatal(err)
	}
	id := created.Msg.WatcherId
	events := func() ([]string, error) {
		t.Helper()
		res, err := fs.GetWatcherEvents(ctx, connect.NewRequest(&filesystempb.GetWatcherEventsRequest{WatcherId: id}))
		if err != nil {
			return nil, err
		}
		var out []string
		for _, ev := range res.Msg.Events {
			out = append(out, eventString(ev))
			if ev.Type == filesystempb.EventType_EVENT_TYPE_CREATE && ev.Entry.GetName() != ev.Name {
				t.Errorf("%s has entry %v", eventString(ev), ev.Entry)
			}
		}
		return out, nil
	}
	// Two ticks: the second is taken only once the first's poll is done.
	poll := func() { tick <- time.Time{}; tick <- time.Time{} }

	e.put("d/b.txt", "2")
	poll()
	e.put("d/a.txt", "11")
	poll()
	if got, err := events(); err != nil || strings.Join(got, " ") != "CREATE:b.txt WRITE:a.txt" {
		t.Fatalf("events %q (%v), want a create and a write", got, err)
	}
	if got, err := events(); err != nil || len(got) != 0 {
		t.Fatalf("events read twice: %q (%v)", got, err)
	}

	// Another sandbox's token does not reach the watcher.
	other := filesystempbconnect.NewFilesystemClient(e.client(otherSandbox, "other-token"), e.srv.URL, connect.WithProtoJSON())
	if _, err := other.GetWatcherEvents(ctx, connect.NewRequest(&filesystempb.GetWatcherEventsRequest{WatcherId: id})); connect.CodeOf(err) != connect.CodeNotFound {
		t.Fatalf("another sandbox's events: %v, want not_found", err)
	}
	if _, err := other.RemoveWatcher(ctx, connect.NewRequest(&filesystempb.RemoveWatcherRequest{WatcherId: id})); connect.CodeOf(err) != connect.CodeNotFound {
		t.Fatalf("another sandbox's remove: %v, want not_found", err)
	}

	// A directory removed under the watcher fails it, once its events are read.
	if _, err := fs.Remove(ctx, connect.NewRequest(&filesystempb.RemoveRequest{Path: "d"})); err != nil {
		t.Fatal(err)
	}
	poll()
	if _, err := events(); connect.CodeOf(err) != connect.CodeNotFound {
		t.Fatalf("events of a removed directory: %v, want not_found", err)
	}

	if _, err := fs.RemoveWatcher(ctx, connect.NewRequest(&filesystempb.RemoveWatcherRequest{WatcherId: id})); err != nil {
		t.Fatal(err)
	}
	if _, err := events(); connect.CodeOf(err) != connect.CodeNotFound {
		t.Fatalf("events of a removed watcher: %v, want not_found", err)
	}

	// A watcher nobody reads goes away by itself.
	e.put("d2/a.txt", "1")
	created, err = fs.CreateWatcher(ctx, connect.NewRequest(&filesystempb.CreateWatcherRequest{Path: "d2"}))
	if err != nil {
		t.Fatal(err)
	}
	id = created.Msg.WatcherId
	clk.Advance(11 * time.Minute)
	if _, err := events(); connect.CodeOf(err) != connect.CodeNotFound {
		t.Fatalf("events of an idle watcher: %v, want not_found", err)
	}
}

func TestWatchBounds(t *testing.T) {
	tests := []struct {
		name string
		opts envd.Options
		want string
	}{
		{"per sandbox", envd.Options{MaxWatchers: 2, MaxWatchersTotal: 10}, "already has 2 directory watches"},
		{"per server", envd.Options{MaxWatchers: 10, MaxWatchersTotal: 2}, "already serves 2 directory watches"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnvWith(t, tt.opts)
			e.pollTicks()
			e.put("d/a.txt", "1")
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			fs := e.files()
			// One slot to a stream, one to a watcher.
			stream, err := fs.WatchDir(ctx, connect.NewRequest(&filesystempb.WatchDirRequest{Path: "d"}))
			if err != nil {
				t.Fatal(err)
			}
			defer stream.Close()
			if !stream.Receive() || stream.Msg().GetStart() == nil {
				t.Fatalf("first message %v (%v), want start", stream.Msg(), stream.Err())
			}
			created, err := fs.CreateWatcher(ctx, connect.NewRequest(&filesystempb.CreateWatcherRequest{Path: "d"}))
			if err != nil {
				t.Fatal(err)
			}
			_, err = fs.CreateWatcher(ctx, connect.NewRequest(&filesystempb.CreateWatcherRequest{Path: "d"}))
			if connect.CodeOf(err) != connect.CodeResourceExhausted || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("a third watch: %v, want resource_exhausted saying %q", err, tt.want)
			}
			// RemoveWatcher gives its slot back at once.
			if _, err := fs.RemoveWatcher(ctx, connect.NewRequest(&filesystempb.RemoveWatcherRequest{WatcherId: created.Msg.WatcherId})); err != nil {
				t.Fatal(err)
			}
			if _, err := fs.CreateWatcher(ctx, connect.NewRequest(&filesystempb.CreateWatcherRequest{Path: "d"})); err != nil {
				t.Fatalf("a watch after a removal: %v", err)
			}
			// A stream's slot comes back once the server sees the client gone,
			// which it learns on its own time: look with a deadline.
			stream.Close()
			deadline := time.Now().Add(10 * time.Second)
			for {
				res, err := fs.CreateWatcher(ctx, connect.NewRequest(&filesystempb.CreateWatcherRequest{Path: "d"}))
				if err == nil {
					_, _ = fs.RemoveWatcher(ctx, connect.NewRequest(&filesystempb.RemoveWatcherRequest{WatcherId: res.Msg.WatcherId}))
					break
				}
				if connect.CodeOf(err) != connect.CodeResourceExhausted || time.Now().After(deadline) {
					t.Fatalf("a watch after a stream ended: %v", err)
				}
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
}

func TestCloseEndsWatches(t *testing.T) {
	e := newEnv(t)
	e.pollTicks()
	e.put("d/a.txt", "1")
	ctx := context.Background()
	fs := e.files()
	stream, err := fs.WatchDir(ctx, connect.NewRequest(&filesystempb.WatchDirRequest{Path: "d"}))
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	if !stream.Receive() || stream.Msg().GetStart() == nil {
		t.Fatalf("first message %v (%v), want start", stream.Msg(), stream.Err())
	}
	if _, err := fs.CreateWatcher(ctx, connect.NewRequest(&filesystempb.CreateWatcherRequest{Path: "d"})); err != nil {
		t.Fatal(err)
	}
	// Close returns once the stream's poller and the watcher's goroutine ended.
	e.handler.Close()
	if stream.Receive() {
		t.Fatalf("after Close: %v", stream.Msg())
	}
	if connect.CodeOf(stream.Err()) != connect.CodeUnavailable {
		t.Fatalf("the stream ended with %v, want unavailable", stream.Err())
	}
	if _, err := fs.CreateWatcher(ctx, connect.NewRequest(&filesystempb.CreateWatcherRequest{Path: "d"})); connect.CodeOf(err) != connect.CodeUnavailable {
		t.Fatalf("a watcher after Close: %v, want unavailable", err)
	}
}

func TestWatchDirKeepalive(t *testing.T) {
	e := newEnv(t)
	e.pollTicks()
	keep := make(chan time.Time)
	asked := make(chan time.Duration, 1)
	envd.SetTicker(e.handler, func(d time.Duration) (<-chan time.Time, func()) {
		asked <- d
		return keep, func() {}
	})
	e.put("d/a.txt", "1")
	req := connect.NewRequest(&filesystempb.WatchDirRequest{Path: "d"})
	// As the SDK's watchDir asks.
	req.Header().Set("Keepalive-Ping-Interval", "50")
	stream, err := e.files().WatchDir(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	if !stream.Receive() || stream.Msg().GetStart() == nil {
		t.Fatalf("first message %v (%v), want start", stream.Msg(), stream.Err())
	}
	if d := <-asked; d != 50*time.Second {
		t.Fatalf("keepalive every %v, want 50s", d)
	}
	keep <- time.Time{}
	if !stream.Receive() || stream.Msg().GetKeepalive() == nil {
		t.Fatalf("after a tick: %v (%v), want a keepalive", stream.Msg(), stream.Err())
	}
}

func TestWatchDirEndsWhenItsDirectoryGoes(t *testing.T) {
	e := newEnv(t)
	tick := e.pollTicks()
	e.put("d/a.txt", "1")
	ctx := context.Background()
	stream, err := e.files().WatchDir(ctx, connect.NewRequest(&filesystempb.WatchDirRequest{Path: "d"}))
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	if !stream.Receive() || stream.Msg().GetStart() == nil {
		t.Fatalf("first message %v (%v), want start", stream.Msg(), stream.Err())
	}
	if _, err := e.files().Remove(ctx, connect.NewRequest(&filesystempb.RemoveRequest{Path: "d"})); err != nil {
		t.Fatal(err)
	}
	tick <- time.Time{}
	if stream.Receive() {
		t.Fatalf("after its directory went: %v", stream.Msg())
	}
	if connect.CodeOf(stream.Err()) != connect.CodeNotFound {
		t.Fatalf("the watch ended with %v, want not_found", stream.Err())
	}
}
