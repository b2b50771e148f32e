package conformance

import (
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/internal/ids"
)

// Options adapt the suite to a backend.
type Options struct {
	// Installation groups the suite's instances; a fresh inst_<ulid> when empty, so a
	// run never sees another run's instances.
	Installation string
	// Template and Resources go into every CreateRequest.
	Template  string
	Resources adapters.Resources
	// WorkDir is a writable directory inside the sandbox for the suite's files. Empty
	// means paths relative to the adapter's default directory.
	WorkDir string
	// SimulatedExec says the adapter's Exec does not run commands (a simulator such as
	// the fake's echo). Checks that need a POSIX shell are then skipped, and say so.
	SimulatedExec bool
	// CheckTimeout bounds each check; 2 minutes when zero.
	CheckTimeout time.Duration
}

// Status of one check.
type Status string

const (
	Pass Status = "pass"
	Fail Status = "fail"
	Skip Status = "skip"
)

// Result of one check.
type Result struct {
	Name     string
	Status   Status
	Message  string
	Duration time.Duration
}

// Report is the outcome of a run, one result per check in a stable order.
type Report struct {
	Results []Result
}

// Failed reports whether any check failed.
func (r Report) Failed() bool {
	return slices.ContainsFunc(r.Results, func(res Result) bool { return res.Status == Fail })
}

// skipError marks a check that does not apply; its message says why.
type skipError struct{ reason string }

func (e skipError) Error() string { return e.reason }

func skipf(format string, args ...any) error { return skipError{fmt.Sprintf(format, args...)} }

// check is one named verification. Checks run in order and share the suite state.
type check struct {
	name string
	run  func(ctx context.Context, s *suite) error
}

// Run executes every check against a and returns the report. It never panics on a
// misbehaving adapter: a panic inside a check is a failure of that check.
func Run(ctx context.Context, a adapters.ExecutionAdapter, opts Options) Report {
	s := newSuite(a, opts)
	var report Report
	for _, c := range checks() {
		report.Results = append(report.Results, s.runCheck(ctx, c))
	}
	report.Results = append(report.Results, s.runCheck(ctx, check{"cleanup", cleanup}))
	return report
}

// Test runs the suite as subtests of t, one per check.
func Test(t *testing.T, a adapters.ExecutionAdapter, opts Options) {
	t.Helper()
	s := newSuite(a, opts)
	all := append(checks(), check{"cleanup", cleanup})
	for _, c := range all {
		t.Run(c.name, func(t *testing.T) { report(t, s.runCheck(t.Context(), c)) })
	}
}

// report ends a Go test the way a check's result says.
func report(t *testing.T, res Result) {
	t.Helper()
	switch res.Status {
	case Fail:
		t.Fatal(res.Message)
	case Skip:
		t.Skip(res.Message)
	}
}

type suite struct {
	a    adapters.ExecutionAdapter
	opts Options

	mu        sync.Mutex
	features  []string // effective features, read by the capabilities check
	main      *adapters.Instance
	created   map[string]string // ref -> installation, for cleanup
	snapshots []string
}

func newSuite(a adapters.ExecutionAdapter, opts Options) *suite {
	if opts.Installation == "" {
		opts.Installation = ids.New("inst")
	}
	if opts.CheckTimeout <= 0 {
		opts.CheckTimeout = 2 * time.Minute
	}
	return &suite{a: a, opts: opts, created: map[string]string{}}
}

func (s *suite) runCheck(ctx context.Context, c check) Result {
	return runOne(ctx, s.opts.CheckTimeout, c.name, func(ctx context.Context) error { return c.run(ctx, s) })
}

// runOne runs one check under its time limit and turns its error into a result.
func runOne(ctx context.Context, timeout time.Duration, name string, run func(context.Context) error) (res Result) {
	res.Name = name
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	defer func() {
		res.Duration = time.Since(start)
		if p := recover(); p != nil {
			res.Status, res.Message = Fail, fmt.Sprintf("panic: %v", p)
		}
	}()
	err := run(ctx)
	var skip skipError
	switch {
	case err == nil:
		res.Status = Pass
	case errors.As(err, &skip):
		res.Status, res.Message = Skip, skip.reason
	default:
		res.Status, res.Message = Fail, err.Error()
	}
	return res
}

// has reports whether the adapter serves a feature (declared and implemented).
func (s *suite) has(feature string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Contains(s.features, feature)
}

func (s *suite) request(installation string) adapters.CreateRequest {
	id := ids.New("sbx")
	return adapters.CreateRequest{
		ID:           id,
		Installation: installation,
		Template:     s.opts.Template,
		Resources:    s.opts.Resources,
		Env:          map[string]string{"CONFORMANCE_BASE": "from-create"},
		Labels:       adapters.OwnershipLabels(map[string]string{"suite": "conformance"}, id, installation),
	}
}

// create makes an instance and remembers it for cleanup.
func (s *suite) create(ctx context.Context, req adapters.CreateRequest) (adapters.Instance, error) {
	inst, err := s.a.Create(ctx, req)
	if err != nil {
		return inst, fmt.Errorf("create %s: %w", req.ID, err)
	}
	if inst.Ref == "" {
		return inst, fmt.Errorf("create %s returned an empty ref", req.ID)
	}
	s.mu.Lock()
	s.created[inst.Ref] = req.Installation
	s.mu.Unlock()
	return inst, nil
}

// mainInstance is a running instance shared by the checks that do not change its state.
func (s *suite) mainInstance(ctx context.Context) (adapters.Instance, error) {
	s.mu.Lock()
	main := s.main
	s.mu.Unlock()
	if main != nil {
		return *main, nil
	}
	inst, err := s.create(ctx, s.request(s.opts.Installation))
	if err != nil {
		return inst, err
	}
	s.mu.Lock()
	s.main = &inst
	s.mu.Unlock()
	return inst, nil
}

func (s *suite) path(elem ...string) string {
	return path.Join(append([]string{s.opts.WorkDir}, elem...)...)
}

func (s *suite) needShell() error {
	if s.opts.SimulatedExec {
		return skipf("needs a shell; the adapter's exec is simulated")
	}
	return nil
}

// expectCode fails unless err carries code.
func expectCode(err error, code api.Code, what string) error {
	if err == nil {
		return fmt.Errorf("%s: succeeded, want %s", what, code)
	}
	if got := api.CodeOf(err); got != code {
		return fmt.Errorf("%s: got %s (%v), want %s", what, got, err, code)
	}
	return nil
}

func (s *suite) exec(ctx context.Context, ref string, req api.ExecRequest) (api.ExecResult, error) {
	res, err := s.a.Exec(ctx, ref, req)
	if err != nil {
		return res, fmt.Errorf("exec %q: %w", describe(req), err)
	}
	return res, nil
}

func describe(req api.ExecRequest) string {
	if req.Command != "" {
		return req.Command
	}
	return strings.Join(req.Args, " ")
}

// cleanup deletes everything the suite made and checks the installation is empty.
func cleanup(ctx context.Context, s *suite) error {
	s.mu.Lock()
	created := s.created
	snaps := s.snapshots
	s.mu.Unlock()
	var errs []error
	installations := map[string]bool{}
	for ref, inst := range created {
		installations[inst] = true
		if err := s.a.Delete(ctx, ref); err != nil {
			errs = append(errs, fmt.Errorf("delete %s: %w", ref, err))
		}
	}
	if sn, ok := s.a.(adapters.Snapshotter); ok {
		for _, ref := range snaps {
			if err := sn.DeleteSnapshot(ctx, ref); err != nil && !api.IsCode(err, api.CodeUnsupportedOperation) {
				errs = append(errs, fmt.Errorf("delete snapshot %s: %w", ref, err))
			}
		}
	}
	for inst := range installations {
		left, err := s.a.List(ctx, inst)
		if err != nil {
			errs = append(errs, fmt.Errorf("list %s after cleanup: %w", inst, err))
		} else if len(left) > 0 {
			errs = append(errs, fmt.Errorf("list %s after deleting every instance still returns %d", inst, len(left)))
		}
	}
	return errors.Join(errs...)
}
