package conformance

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptrace"
	"slices"
	"sync"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/internal/ids"
)

// checks lists the suite in order. Capabilities runs first: later checks read the
// effective features it records.
func checks() []check {
	return []check{
		{"info", checkInfo},
		{"capabilities", checkCapabilities},
		{"health", checkHealth},
		{"capacity", checkCapacity},
		{"create/returns-running-instance", checkCreateRunning},
		{"create/idempotent", checkCreateIdempotent},
		{"create/after-discarded-response", checkCreateAfterDiscard},
		{"create/concurrent-same-id", checkCreateConcurrent},
		{"create/invalid-request", checkCreateInvalid},
		{"create/missing-snapshot", checkCreateMissingSnapshot},
		{"get", checkGet},
		{"list/filters-by-installation", checkListInstallation},
		{"delete/idempotent", checkDelete},
		{"exec/stdout", checkExecStdout},
		{"exec/args-without-shell", checkExecArgs},
		{"exec/exit-code", checkExecExitCode},
		{"exec/stderr", checkExecStderr},
		{"exec/env", checkExecEnv},
		{"exec/cwd", checkExecCwd},
		{"exec/stdin", checkExecStdin},
		{"exec/timeout", checkExecTimeout},
		{"exec/output-cap", checkExecOutputCap},
		{"exec/invalid-request", checkExecInvalid},
		{"exec/missing-instance", checkExecMissing},
		{"feature/exec.stream", checkStream},
		{"feature/exec.stream/emit-error-stops", checkStreamEmitError},
		{"feature/exec.stream/bytes", checkStreamBytes},
		{"feature/exec.stdin", checkStdin},
		{"feature/pty", checkPTY},
		{"feature/files", checkFiles},
		{"feature/lifecycle.stop-start", checkStopStart},
		{"feature/lifecycle.pause-resume", checkPauseResume},
		{"feature/snapshots.disk", checkSnapshot(adapters.SnapshotDisk, adapters.FeatureSnapshotsDisk)},
		{"feature/snapshots.memory", checkSnapshot(adapters.SnapshotMemory, adapters.FeatureSnapshotsMemory)},
		{"feature/fork", checkFork},
		{"feature/ports.expose", checkPorts},
		{"undeclared-operations", checkUndeclared},
	}
}

func checkInfo(_ context.Context, s *suite) error {
	info := s.a.Info()
	var errs []error
	if info.Kind == "" {
		errs = append(errs, errors.New("info.kind is empty"))
	}
	if info.Protocol != adapters.ProtocolVersion {
		errs = append(errs, fmt.Errorf("info.protocol is %q, want %q", info.Protocol, adapters.ProtocolVersion))
	}
	if err := info.Trust.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("info.trust: %w", err))
	}
	if info.Isolation == "" {
		errs = append(errs, errors.New("info.isolation is empty: say what separates sandboxes"))
	}
	return errors.Join(errs...)
}

func checkCapabilities(ctx context.Context, s *suite) error {
	caps, err := s.a.Capabilities(ctx)
	if err != nil {
		return fmt.Errorf("capabilities: %w", err)
	}
	var errs []error
	for _, f := range caps.Features {
		if !adapters.KnownFeature(f) {
			errs = append(errs, fmt.Errorf("declares unknown feature %q", f))
		}
	}
	if caps.MaxCPU < 0 || caps.MaxMemoryMiB < 0 || caps.MaxDiskGiB < 0 {
		errs = append(errs, errors.New("negative limits (0 means no limit)"))
	}
	effective := adapters.EffectiveFeatures(s.a, caps.Features)
	if !slices.Contains(effective, adapters.FeatureExec) {
		errs = append(errs, errors.New("does not declare exec, which every adapter implements"))
	}
	if len(caps.Templates) > 0 && s.opts.Template != "" && !slices.Contains(caps.Templates, s.opts.Template) {
		errs = append(errs, fmt.Errorf("template %q is not among the declared templates %v", s.opts.Template, caps.Templates))
	}
	s.mu.Lock()
	s.features = effective
	s.mu.Unlock()
	return errors.Join(errs...)
}

func checkHealth(ctx context.Context, s *suite) error {
	if err := s.a.Health(ctx); err != nil {
		return fmt.Errorf("health: %w (the suite needs a backend that can accept work)", err)
	}
	return nil
}

func checkCapacity(ctx context.Context, s *suite) error {
	c, err := s.a.Capacity(ctx)
	if err != nil {
		return fmt.Errorf("capacity: %w", err)
	}
	if c.Bounded && (c.FreeCPU < 0 || c.FreeMemoryMiB < 0 || c.LargestFreeCPU < 0 || c.LargestFreeMemoryMiB < 0) {
		return fmt.Errorf("bounded capacity with negative values: %+v", c)
	}
	if c.Bounded && (c.LargestFreeCPU > c.FreeCPU || c.LargestFreeMemoryMiB > c.FreeMemoryMiB) {
		return fmt.Errorf("largest free node exceeds the total free: %+v", c)
	}
	return nil
}

func checkCreateRunning(ctx context.Context, s *suite) error {
	inst, err := s.mainInstance(ctx)
	if err != nil {
		return err
	}
	if inst.State != adapters.StateRunning {
		return fmt.Errorf("create returned state %q; it should return once the instance is running", inst.State)
	}
	return nil
}

func checkCreateIdempotent(ctx context.Context, s *suite) error {
	req := s.request(s.opts.Installation)
	first, err := s.create(ctx, req)
	if err != nil {
		return err
	}
	second, err := s.create(ctx, req)
	if err != nil {
		return err
	}
	if first.Ref != second.Ref {
		return fmt.Errorf("second create with the same id returned ref %q, first %q", second.Ref, first.Ref)
	}
	return s.expectOneInstance(ctx, req)
}

// checkCreateAfterDiscard models a response lost on the way back, or a control plane
// that gave up and crashed: the first Create is cancelled while in flight, so the
// caller never sees its answer and all it can do is ask again with the same ID.
func checkCreateAfterDiscard(ctx context.Context, s *suite) error {
	req := s.request(s.opts.Installation)
	first, firstErr := s.abandonedCreate(ctx, req)
	if firstErr == nil && first.Ref != "" {
		s.mu.Lock()
		s.created[first.Ref] = req.Installation
		s.mu.Unlock()
	}
	inst, err := s.create(ctx, req)
	if err != nil {
		return fmt.Errorf("retry after an abandoned create: %w", err)
	}
	if inst.SandboxID != "" && inst.SandboxID != req.ID {
		return fmt.Errorf("retry returned sandbox %q, want %q", inst.SandboxID, req.ID)
	}
	if firstErr == nil && first.Ref != "" && first.Ref != inst.Ref {
		return fmt.Errorf("retry returned ref %q, the abandoned create %q", inst.Ref, first.Ref)
	}
	return s.expectOneInstance(ctx, req)
}

// abandonedCreate calls Create and cancels its context as soon as the adapter has
// sent an HTTP request: over the protocol the connection to the plugin is dropped
// after the plugin has the request, and an adapter calling an HTTP backend is cut
// off after the backend has it. An adapter that sends no HTTP request runs to the end
// and only its answer is discarded.
func (s *suite) abandonedCreate(ctx context.Context, req adapters.CreateRequest) (adapters.Instance, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		WroteRequest: func(httptrace.WroteRequestInfo) { cancel() },
	})
	return s.a.Create(ctx, req)
}

func checkCreateConcurrent(ctx context.Context, s *suite) error {
	req := s.request(s.opts.Installation)
	const n = 4
	refs := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			inst, err := s.create(ctx, req)
			refs[i], errs[i] = inst.Ref, err
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	for _, ref := range refs[1:] {
		if ref != refs[0] {
			return fmt.Errorf("concurrent creates of one id returned different refs: %v", refs)
		}
	}
	return s.expectOneInstance(ctx, req)
}

// expectOneInstance checks that List shows exactly one instance for req's sandbox.
func (s *suite) expectOneInstance(ctx context.Context, req adapters.CreateRequest) error {
	list, err := s.a.List(ctx, req.Installation)
	if err != nil {
		return fmt.Errorf("list: %w", err)
	}
	var n int
	for _, inst := range list {
		if inst.SandboxID == req.ID {
			n++
		}
	}
	if n != 1 {
		return fmt.Errorf("list shows %d instances for sandbox %s, want exactly 1", n, req.ID)
	}
	return nil
}

func checkCreateInvalid(ctx context.Context, s *suite) error {
	req := s.request(s.opts.Installation)
	req.ID = ""
	_, err := s.a.Create(ctx, req)
	return expectCode(err, api.CodeInvalidRequest, "create without an id")
}

func checkCreateMissingSnapshot(ctx context.Context, s *suite) error {
	if _, ok := s.a.(adapters.Snapshotter); !ok {
		return skipf("the adapter has no snapshots")
	}
	req := s.request(s.opts.Installation)
	req.FromSnapshot = "snap_does_not_exist_" + ids.New("x")
	inst, err := s.a.Create(ctx, req)
	if err == nil {
		s.mu.Lock()
		s.created[inst.Ref] = req.Installation
		s.mu.Unlock()
	}
	return expectCode(err, api.CodeInvalidRequest, "create from a missing snapshot")
}

func checkGet(ctx context.Context, s *suite) error {
	main, err := s.mainInstance(ctx)
	if err != nil {
		return err
	}
	got, err := s.a.Get(ctx, main.Ref)
	if err != nil {
		return fmt.Errorf("get %s: %w", main.Ref, err)
	}
	if got.Ref != main.Ref || got.SandboxID != main.SandboxID {
		return fmt.Errorf("get returned ref %q sandbox %q, want %q %q", got.Ref, got.SandboxID, main.Ref, main.SandboxID)
	}
	if got.State != adapters.StateRunning {
		return fmt.Errorf("get: state %q, want running", got.State)
	}
	return nil
}

func checkListInstallation(ctx context.Context, s *suite) error {
	mine, other := ids.New("inst"), ids.New("inst")
	want := map[string]string{}
	for _, inst := range []string{mine, mine, other} {
		req := s.request(inst)
		created, err := s.create(ctx, req)
		if err != nil {
			return err
		}
		if inst == mine {
			want[created.Ref] = req.ID
		}
	}
	list, err := s.a.List(ctx, mine)
	if err != nil {
		return fmt.Errorf("list: %w", err)
	}
	got := map[string]string{}
	for _, inst := range list {
		got[inst.Ref] = inst.SandboxID
	}
	if len(got) != len(want) || len(list) != len(want) {
		return fmt.Errorf("list returned %d instances %v, want exactly %v", len(list), got, want)
	}
	for ref, sbx := range want {
		if got[ref] != sbx {
			return fmt.Errorf("list: instance %s has sandboxId %q, want %q", ref, got[ref], sbx)
		}
	}
	empty, err := s.a.List(ctx, ids.New("inst"))
	if err != nil {
		return fmt.Errorf("list of an unused installation: %w", err)
	}
	if len(empty) != 0 {
		return fmt.Errorf("list of an unused installation returned %d instances", len(empty))
	}
	return nil
}

func checkDelete(ctx context.Context, s *suite) error {
	req := s.request(s.opts.Installation)
	inst, err := s.create(ctx, req)
	if err != nil {
		return err
	}
	if err := s.a.Delete(ctx, inst.Ref); err != nil {
		return fmt.Errorf("delete: %w", err)
	}
	if err := s.a.Delete(ctx, inst.Ref); err != nil {
		return fmt.Errorf("second delete of the same ref must succeed: %w", err)
	}
	if _, err := s.a.Get(ctx, inst.Ref); expectCode(err, api.CodeNotFound, "get after delete") != nil {
		return expectCode(err, api.CodeNotFound, "get after delete")
	}
	list, err := s.a.List(ctx, req.Installation)
	if err != nil {
		return fmt.Errorf("list: %w", err)
	}
	for _, l := range list {
		if l.Ref == inst.Ref {
			return fmt.Errorf("list still shows deleted instance %s", inst.Ref)
		}
	}
	return nil
}
