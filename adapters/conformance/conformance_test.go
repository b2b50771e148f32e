package conformance_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/adapters/adapterhttp"
	"github.com/different-ai/differently/adapters/conformance"
	"github.com/different-ai/differently/adapters/devhost"
	"github.com/different-ai/differently/adapters/fake"
	"github.com/different-ai/differently/api"
)

func newDevhost(t *testing.T) adapters.ExecutionAdapter {
	a, err := devhost.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func newFake(*testing.T) adapters.ExecutionAdapter { return fake.New(fake.Config{}) }

// overHTTP serves a through the protocol handler on loopback and returns a client.
func overHTTP(t *testing.T, a adapters.ExecutionAdapter) adapters.ExecutionAdapter {
	const token = "conformance-token"
	srv := httptest.NewServer(adapterhttp.Handler(a, token))
	t.Cleanup(srv.Close)
	c, err := adapterhttp.NewClient(srv.URL, token)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	return c
}

func TestDevhost(t *testing.T) {
	conformance.Test(t, newDevhost(t), conformance.Options{})
}

func TestDevhostOverHTTP(t *testing.T) {
	conformance.Test(t, overHTTP(t, newDevhost(t)), conformance.Options{})
}

func TestFake(t *testing.T) {
	conformance.Test(t, newFake(t), conformance.Options{SimulatedExec: true})
}

func TestFakeOverHTTP(t *testing.T) {
	conformance.Test(t, overHTTP(t, newFake(t)), conformance.Options{SimulatedExec: true})
}

// TestFakeLimitedFeatures: a fake declaring only exec must refuse everything else.
func TestFakeLimitedFeatures(t *testing.T) {
	a := fake.New(fake.Config{Features: []string{adapters.FeatureExec}})
	conformance.Test(t, a, conformance.Options{SimulatedExec: true})
	conformance.Test(t, overHTTP(t, a), conformance.Options{SimulatedExec: true})
}

// The suite is only worth running if it fails broken adapters. Each case breaks one
// rule of the contract and names a check that must then fail.
type nonIdempotent struct{ adapters.ExecutionAdapter }

func (n nonIdempotent) Create(ctx context.Context, req adapters.CreateRequest) (adapters.Instance, error) {
	req.ID += "-again"
	return n.ExecutionAdapter.Create(ctx, req)
}

type strictDelete struct{ adapters.ExecutionAdapter }

func (s strictDelete) Delete(ctx context.Context, ref string) error {
	if _, err := s.Get(ctx, ref); err != nil {
		return err
	}
	return s.ExecutionAdapter.Delete(ctx, ref)
}

// forgetful is an adapter in front of an HTTP backend that creates an instance not
// keyed by the sandbox ID, then asks the backend whether it booted, and remembers the
// ID only when its caller is still there: a caller that goes away mid-create leaves
// an instance the retry does not find.
type forgetful struct {
	*fake.Adapter
	backend string
	mu      sync.Mutex
	calls   map[string]int
	byID    map[string]string
}

func newForgetful(t *testing.T) *forgetful {
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	t.Cleanup(srv.Close)
	return &forgetful{Adapter: fake.New(fake.Config{}), backend: srv.URL, calls: map[string]int{}, byID: map[string]string{}}
}

func (f *forgetful) Create(ctx context.Context, req adapters.CreateRequest) (adapters.Instance, error) {
	f.mu.Lock()
	ref, known := f.byID[req.ID]
	f.calls[req.ID]++
	n := f.calls[req.ID]
	f.mu.Unlock()
	if known {
		return f.Get(ctx, ref)
	}
	inner := req
	inner.ID = fmt.Sprintf("%s#%d", req.ID, n)
	inst, err := f.Adapter.Create(context.WithoutCancel(ctx), inner)
	if err != nil {
		return inst, err
	}
	if err := f.waitBooted(ctx); err != nil {
		return adapters.Instance{}, adapters.Unavailable("abandoned while booting: %v", err)
	}
	f.mu.Lock()
	f.byID[req.ID] = inst.Ref
	f.mu.Unlock()
	inst.SandboxID = req.ID
	return inst, nil
}

func (f *forgetful) waitBooted(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, f.backend, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	return ctx.Err()
}

func (f *forgetful) Get(ctx context.Context, ref string) (adapters.Instance, error) {
	inst, err := f.Adapter.Get(ctx, ref)
	inst.SandboxID, _, _ = strings.Cut(inst.SandboxID, "#")
	return inst, err
}

func (f *forgetful) List(ctx context.Context, installation string) ([]adapters.Instance, error) {
	list, err := f.Adapter.List(ctx, installation)
	for i := range list {
		list[i].SandboxID, _, _ = strings.Cut(list[i].SandboxID, "#")
	}
	return list, err
}

// runningOnly lists only running instances, hiding stopped and paused ones.
type runningOnly struct{ *fake.Adapter }

func (r runningOnly) List(ctx context.Context, installation string) ([]adapters.Instance, error) {
	list, err := r.Adapter.List(ctx, installation)
	out := []adapters.Instance{}
	for _, inst := range list {
		if inst.State == adapters.StateRunning {
			out = append(out, inst)
		}
	}
	return out, err
}

type leakyList struct{ adapters.ExecutionAdapter }

func (l leakyList) List(ctx context.Context, installation string) ([]adapters.Instance, error) {
	return l.ExecutionAdapter.List(ctx, "")
}

// overclaiming declares files without refusing undeclared calls on the others: it
// forwards every optional interface of the fake but declares only exec.
type overclaiming struct{ *fake.Adapter }

func (o overclaiming) Capabilities(ctx context.Context) (adapters.Capabilities, error) {
	c, err := o.Adapter.Capabilities(ctx)
	c.Features = []string{adapters.FeatureExec}
	return c, err
}

type noTimeout struct{ adapters.ExecutionAdapter }

func (n noTimeout) Exec(ctx context.Context, ref string, req api.ExecRequest) (api.ExecResult, error) {
	if req.TimeoutSeconds > 0 {
		req.TimeoutSeconds = 0
		req.Command = "exit 0"
	}
	return n.ExecutionAdapter.Exec(ctx, ref, req)
}

func TestSuiteFailsBrokenAdapters(t *testing.T) {
	tests := []struct {
		name      string
		adapter   func(t *testing.T) adapters.ExecutionAdapter
		simulated bool
		failing   string
	}{
		{"create not idempotent", func(t *testing.T) adapters.ExecutionAdapter { return nonIdempotent{newFake(t)} }, true, "create/idempotent"},
		{"create forgets an abandoned request", func(t *testing.T) adapters.ExecutionAdapter { return newForgetful(t) }, true, "create/after-discarded-response"},
		{"list hides stopped", func(*testing.T) adapters.ExecutionAdapter { return runningOnly{fake.New(fake.Config{})} }, true, "feature/lifecycle.stop-start"},
		{"list hides paused", func(*testing.T) adapters.ExecutionAdapter { return runningOnly{fake.New(fake.Config{})} }, true, "feature/lifecycle.pause-resume"},
		{"delete of missing fails", func(t *testing.T) adapters.ExecutionAdapter { return strictDelete{newFake(t)} }, true, "delete/idempotent"},
		{"list ignores installation", func(t *testing.T) adapters.ExecutionAdapter { return leakyList{newDevhost(t)} }, false, "list/filters-by-installation"},
		{"undeclared operations work", func(*testing.T) adapters.ExecutionAdapter { return overclaiming{fake.New(fake.Config{})} }, true, "undeclared-operations"},
		{"timeout ignored", func(t *testing.T) adapters.ExecutionAdapter { return noTimeout{newDevhost(t)} }, false, "exec/timeout"},
		{"echo is not a shell", newFake, false, "exec/exit-code"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			report := conformance.Run(t.Context(), tt.adapter(t), conformance.Options{SimulatedExec: tt.simulated})
			var found bool
			for _, r := range report.Results {
				if r.Name == tt.failing {
					found = true
					if r.Status != conformance.Fail {
						t.Errorf("check %s: %s (%s), want fail", r.Name, r.Status, r.Message)
					}
				}
			}
			if !found {
				t.Fatalf("no check named %s", tt.failing)
			}
			if !report.Failed() {
				t.Error("report.Failed() is false")
			}
		})
	}
}

func TestReportNamesEveryCheckOnce(t *testing.T) {
	report := conformance.Run(t.Context(), newFake(t), conformance.Options{SimulatedExec: true})
	seen := map[string]bool{}
	for _, r := range report.Results {
		if seen[r.Name] {
			t.Errorf("check %s reported twice", r.Name)
		}
		seen[r.Name] = true
		if r.Status == conformance.Skip && !strings.Contains(r.Message, " ") {
			t.Errorf("skip of %s gives no reason: %q", r.Name, r.Message)
		}
	}
	if report.Failed() {
		t.Errorf("fake fails the suite: %+v", report.Results)
	}
}
