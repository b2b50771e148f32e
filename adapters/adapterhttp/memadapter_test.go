package adapterhttp_test

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/adapters/adapterhttp"
	"github.com/different-ai/differently/api"
)

// memAdapter is a map-backed adapter implementing every optional interface. Commands
// understood by Exec and ExecStream:
//
//	echo X      stdout "X\n"
//	exit N      exit code N
//	block       wait for the context, reporting through entered and canceled
//	panic       panic
//	words A B   (stream) one stdout event per word, then "done" on stderr, exit 3
//	timeout     (stream) exit 124 with TimedOut
//	big         (stream) emit the bigData field as one event
//	panic-after (stream) emit one event, then panic
type memAdapter struct {
	features  []string
	healthErr error
	bigData   string

	// entered receives when a "block" command starts; canceled is closed when it sees
	// its context end.
	entered  chan struct{}
	canceled chan struct{}

	mu        sync.Mutex
	seq       int
	instances map[string]*memInstance // by ref
	snapshots map[string]map[string][]byte
}

type memInstance struct {
	adapters.Instance
	installation string
	files        map[string][]byte
}

var allFeatures = []string{
	adapters.FeatureExec, adapters.FeatureExecStream, adapters.FeatureFiles,
	adapters.FeatureStopStart, adapters.FeaturePauseResume, adapters.FeatureSnapshotsDisk,
	adapters.FeatureSnapshotsMemory, adapters.FeatureFork, adapters.FeaturePortsExpose,
	adapters.FeatureArchAMD64,
}

func newMem() *memAdapter {
	return &memAdapter{
		features:  allFeatures,
		entered:   make(chan struct{}, 1),
		canceled:  make(chan struct{}),
		instances: map[string]*memInstance{},
		snapshots: map[string]map[string][]byte{},
	}
}

var (
	_ adapters.Streamer    = (*memAdapter)(nil)
	_ adapters.FileSystem  = (*memAdapter)(nil)
	_ adapters.Lifecycle   = (*memAdapter)(nil)
	_ adapters.Pauser      = (*memAdapter)(nil)
	_ adapters.Snapshotter = (*memAdapter)(nil)
	_ adapters.PortExposer = (*memAdapter)(nil)
)

// basicAdapter hides every optional interface of the adapter it wraps.
type basicAdapter struct{ adapters.ExecutionAdapter }

func (m *memAdapter) Info() adapters.Info {
	return adapters.Info{Kind: "mem", Version: "0.1", Trust: api.TrustPrivate, Isolation: "none (test)", Protocol: adapters.ProtocolVersion}
}

func (m *memAdapter) Capabilities(context.Context) (adapters.Capabilities, error) {
	return adapters.Capabilities{Features: slices.Clone(m.features), MaxCPU: 4, Regions: []string{"lab"}}, nil
}

func (m *memAdapter) Capacity(context.Context) (adapters.Capacity, error) {
	return adapters.Capacity{Bounded: true, FreeCPU: 3.5, FreeMemoryMiB: 2048}, nil
}

func (m *memAdapter) Health(context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.healthErr
}

func (m *memAdapter) setHealth(err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.healthErr = err
}

func (m *memAdapter) Create(_ context.Context, req adapters.CreateRequest) (adapters.Instance, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, in := range m.instances {
		if in.SandboxID == req.ID {
			return in.Instance, nil
		}
	}
	files := map[string][]byte{}
	if req.FromSnapshot != "" {
		snap, ok := m.snapshots[req.FromSnapshot]
		if !ok {
			return adapters.Instance{}, adapters.InvalidRequest("snapshot %q does not exist", req.FromSnapshot)
		}
		files = maps.Clone(snap)
	}
	m.seq++
	// A slash, a space and a percent sign prove refs survive the URL.
	ref := fmt.Sprintf("i/%d %%x", m.seq)
	in := &memInstance{
		Instance:     adapters.Instance{Ref: ref, SandboxID: req.ID, State: adapters.StateRunning, Region: "lab"},
		installation: req.Installation,
		files:        files,
	}
	m.instances[ref] = in
	return in.Instance, nil
}

func (m *memAdapter) lookup(ref string) (*memInstance, error) {
	in, ok := m.instances[ref]
	if !ok {
		return nil, adapters.NotFound("instance %q does not exist", ref)
	}
	return in, nil
}

func (m *memAdapter) Get(_ context.Context, ref string) (adapters.Instance, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	in, err := m.lookup(ref)
	if err != nil {
		return adapters.Instance{}, err
	}
	return in.Instance, nil
}

func (m *memAdapter) List(_ context.Context, installation string) ([]adapters.Instance, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []adapters.Instance
	for _, in := range m.instances {
		if in.installation == installation {
			out = append(out, in.Instance)
		}
	}
	return out, nil
}

func (m *memAdapter) Delete(_ context.Context, ref string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.instances, ref)
	return nil
}

func (m *memAdapter) running(ref string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	in, err := m.lookup(ref)
	if err != nil {
		return err
	}
	if in.State != adapters.StateRunning {
		return adapters.InvalidState("instance is %s", in.State)
	}
	return nil
}

func (m *memAdapter) Exec(ctx context.Context, ref string, req api.ExecRequest) (api.ExecResult, error) {
	if err := m.running(ref); err != nil {
		return api.ExecResult{}, err
	}
	verb, arg, _ := strings.Cut(req.Command, " ")
	switch verb {
	case "echo":
		return api.ExecResult{Stdout: arg + "\n", DurationMs: 1}, nil
	case "exit":
		code, _ := strconv.Atoi(arg)
		return api.ExecResult{ExitCode: code, Stderr: "exiting\n"}, nil
	case "block":
		m.entered <- struct{}{}
		<-ctx.Done()
		close(m.canceled)
		return api.ExecResult{}, ctx.Err()
	case "panic":
		panic("adapter bug")
	}
	return api.ExecResult{ExitCode: 127, Stderr: "unknown command\n"}, nil
}

func (m *memAdapter) ExecStream(ctx context.Context, ref string, req api.ExecRequest, emit func(api.ExecEvent) error) (adapters.ExitStatus, error) {
	if err := m.running(ref); err != nil {
		return adapters.ExitStatus{}, err
	}
	verb, arg, _ := strings.Cut(req.Command, " ")
	switch verb {
	case "words":
		for _, w := range strings.Fields(arg) {
			if err := emit(api.ExecEvent{Stream: api.StreamStdout, Data: w + "\n"}); err != nil {
				return adapters.ExitStatus{}, err
			}
		}
		if err := emit(api.ExecEvent{Stream: api.StreamStderr, Data: "done\n"}); err != nil {
			return adapters.ExitStatus{}, err
		}
		return adapters.ExitStatus{Code: 3}, nil
	case "timeout":
		return adapters.ExitStatus{Code: api.TimeoutExitCode, TimedOut: true}, nil
	case "big":
		return adapters.ExitStatus{}, emit(api.ExecEvent{Stream: api.StreamStdout, Data: m.bigData})
	case "panic-after":
		_ = emit(api.ExecEvent{Stream: api.StreamStdout, Data: "started\n"})
		panic("adapter bug mid-stream")
	}
	res, err := m.Exec(ctx, ref, req)
	if err != nil {
		return adapters.ExitStatus{}, err
	}
	return adapters.ExitStatus{Code: res.ExitCode}, emit(api.ExecEvent{Stream: api.StreamStdout, Data: res.Stdout})
}

func (m *memAdapter) ReadFile(_ context.Context, ref, p string) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	in, err := m.lookup(ref)
	if err != nil {
		return nil, err
	}
	data, ok := in.files[p]
	if !ok {
		return nil, adapters.NotFound("file %s does not exist", p)
	}
	return slices.Clone(data), nil
}

func (m *memAdapter) WriteFile(_ context.Context, ref, p string, data []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	in, err := m.lookup(ref)
	if err != nil {
		return err
	}
	in.files[p] = slices.Clone(data)
	return nil
}

func (m *memAdapter) ListFiles(_ context.Context, ref, dir string) ([]adapters.FileInfo, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	in, err := m.lookup(ref)
	if err != nil {
		return nil, err
	}
	var out []adapters.FileInfo
	for p, data := range in.files {
		if path.Dir(p) == dir {
			out = append(out, adapters.FileInfo{Name: path.Base(p), Path: p, Size: int64(len(data)), Mode: 0o644})
		}
	}
	slices.SortFunc(out, func(a, b adapters.FileInfo) int { return strings.Compare(a.Path, b.Path) })
	return out, nil
}

func (m *memAdapter) setState(ref string, from []adapters.InstanceState, to adapters.InstanceState) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	in, err := m.lookup(ref)
	if err != nil {
		return err
	}
	if in.State != to && !slices.Contains(from, in.State) {
		return adapters.InvalidState("instance is %s", in.State)
	}
	in.State = to
	return nil
}

func (m *memAdapter) Stop(_ context.Context, ref string) error {
	return m.setState(ref, []adapters.InstanceState{adapters.StateRunning}, adapters.StateStopped)
}

func (m *memAdapter) Start(_ context.Context, ref string) error {
	return m.setState(ref, []adapters.InstanceState{adapters.StateStopped}, adapters.StateRunning)
}

func (m *memAdapter) Pause(_ context.Context, ref string) error {
	return m.setState(ref, []adapters.InstanceState{adapters.StateRunning}, adapters.StatePaused)
}

func (m *memAdapter) Resume(_ context.Context, ref string) error {
	return m.setState(ref, []adapters.InstanceState{adapters.StatePaused}, adapters.StateRunning)
}

func (m *memAdapter) Snapshot(_ context.Context, ref string, kind adapters.SnapshotKind) (adapters.Snapshot, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	in, err := m.lookup(ref)
	if err != nil {
		return adapters.Snapshot{}, err
	}
	m.seq++
	snapRef := fmt.Sprintf("snap/%d", m.seq)
	m.snapshots[snapRef] = maps.Clone(in.files)
	return adapters.Snapshot{Ref: snapRef, Kind: kind, SizeBytes: int64(len(in.files))}, nil
}

func (m *memAdapter) DeleteSnapshot(_ context.Context, snapRef string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.snapshots[snapRef]; !ok {
		// Against the contract on purpose: the client must turn it into success.
		return adapters.NotFound("snapshot %q does not exist", snapRef)
	}
	delete(m.snapshots, snapRef)
	return nil
}

func (m *memAdapter) ExposePort(_ context.Context, ref string, port int) (string, error) {
	if err := m.running(ref); err != nil {
		return "", err
	}
	return fmt.Sprintf("https://%d.ports.example/", port), nil
}

// serve starts a Handler for a on loopback and returns a client for it.
func serve(t *testing.T, a adapters.ExecutionAdapter, token string, opts ...adapterhttp.Option) (*httptest.Server, *adapterhttp.Client) {
	t.Helper()
	srv := httptest.NewServer(adapterhttp.Handler(a, token))
	t.Cleanup(srv.Close)
	c, err := adapterhttp.NewClient(srv.URL, token, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return srv, c
}

// rawServer serves fixed answers that claim to speak the protocol, for testing how the
// client reads what Handler would never send.
func rawServer(t *testing.T, fn http.HandlerFunc) *adapterhttp.Client {
	t.Helper()
	srv := httptest.NewServer(fn)
	t.Cleanup(srv.Close)
	c, err := adapterhttp.NewClient(srv.URL, "")
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// count is how many instances the adapter holds.
func (m *memAdapter) count() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.instances)
}
