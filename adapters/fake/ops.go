package fake

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/internal/ids"
)

// require refuses an optional operation whose feature the fake was not configured to
// declare, as a backend without it would: operators use a narrow features list to
// test how the control plane treats pools that lack something.
func (a *Adapter) require(op string, features ...string) error {
	for _, f := range features {
		if slices.Contains(a.cfg.Features, f) {
			return nil
		}
	}
	return adapters.Unsupported(op)
}

// runningLocked returns the instance for ref when it can take an operation that
// needs a live guest.
func (a *Adapter) runningLocked(ref, op string) (*instance, error) {
	in, err := a.lookupLocked(ref)
	if err != nil {
		return nil, err
	}
	if in.pub.State != adapters.StateRunning {
		return nil, adapters.InvalidState("fake: %s needs a running instance, %s is %s", op, ref, in.pub.State)
	}
	return in, nil
}

func (a *Adapter) Exec(ctx context.Context, ref string, req api.ExecRequest) (api.ExecResult, error) {
	res, err := a.run(ctx, ref, req)
	if err != nil {
		return api.ExecResult{}, err
	}
	// ExecFunc may hand back anything; the contract caps synchronous output.
	var cut bool
	res.Stdout, cut = capOutput(res.Stdout)
	res.Truncated = res.Truncated || cut
	res.Stderr, cut = capOutput(res.Stderr)
	res.Truncated = res.Truncated || cut
	return res, nil
}

func capOutput(s string) (string, bool) {
	if len(s) <= api.MaxExecOutputBytes {
		return s, false
	}
	return s[:api.MaxExecOutputBytes], true
}

// run is Exec without the output cap, which streaming does not apply.
func (a *Adapter) run(ctx context.Context, ref string, req api.ExecRequest) (api.ExecResult, error) {
	view, err := a.startExec(ref, req)
	if err != nil {
		return api.ExecResult{}, err
	}
	if f := a.drawExecFault(false); f.err != nil {
		return api.ExecResult{}, f.err
	}
	return a.command(ctx, view, req)
}

// startExec checks that req can run in ref and returns what the fake knows of it.
func (a *Adapter) startExec(ref string, req api.ExecRequest) (InstanceView, error) {
	a.mu.Lock()
	in, err := a.runningLocked(ref, "exec")
	var view InstanceView
	if err == nil {
		view = in.view()
	}
	a.mu.Unlock()
	if err != nil {
		return InstanceView{}, err
	}
	if err := req.Validate(); err != nil {
		return InstanceView{}, err
	}
	return view, nil
}

// command runs req: ExecFunc, or the echo.
func (a *Adapter) command(ctx context.Context, view InstanceView, req api.ExecRequest) (api.ExecResult, error) {
	if a.cfg.ExecFunc != nil {
		return a.cfg.ExecFunc(ctx, view, req)
	}
	text := req.Command
	if text == "" {
		text = strings.Join(req.Args, " ")
	}
	return api.ExecResult{Stdout: text + "\n"}, nil
}

// execFault is the execErrorRate (and, streamed, execStreamDropRate) draw of one
// exec that would run; err is nil when no fault hit. A streamed exec's fault strikes before any output or, when afterOutput,
// once part of its output (share cut, in [0, 1), of it) has been emitted.
type execFault struct {
	err         error
	afterOutput bool
	cut         float64
}

// drawExecFault draws the fault of one exec, plain or streamed, under one hold of the
// lock, so that a call's draws stay together whatever other calls do meanwhile.
func (a *Adapter) drawExecFault(streamed bool) execFault {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.chanceLocked(a.cfg.ExecErrorRate) {
		if streamed && a.chanceLocked(a.cfg.ExecStreamDropRate) {
			return execFault{err: streamDropped(), afterOutput: true, cut: a.rng.Float64()}
		}
		return execFault{}
	}
	code := a.pickLocked(a.cfg.ExecErrorCodes)
	if streamed && a.rng.IntN(2) == 1 {
		return execFault{
			err:         api.Errorf(code, "fake: injected exec failure after output (execErrorRate: %s)", code),
			afterOutput: true,
			cut:         a.rng.Float64(),
		}
	}
	return execFault{err: api.Errorf(code, "fake: injected exec failure (execErrorRate: %s)", code)}
}

// ErrStreamDropped is in the chain of the error of a streamed exec that an
// execStreamDropRate fault cut short: the command ran, part of its output was
// emitted, and then the connection to the backend was lost. The error is
// provider_unavailable, which is what a client of the adapter protocol reports for
// a stream that breaks off. The fake knows nothing of connections: a server of the
// adapter protocol in front of it (`differently-server adapter serve`) looks for
// this error and drops the connection instead of ending the stream with an error
// line, so that its clients meet a real transport failure.
var ErrStreamDropped = errors.New("the connection drops here")

func streamDropped() error {
	return fmt.Errorf("%w: %w", adapters.Unavailable("fake: injected stream drop (execStreamDropRate)"), ErrStreamDropped)
}

// ExecStream emits the whole stdout, then the whole stderr: the fake has no process
// whose output could interleave. An execErrorRate fault fails the call before any
// output, as Exec's does, or, for half of them (drawn), runs the command, emits part
// of its output and then returns the error, as a backend whose stream breaks would.
// An execStreamDropRate fault, drawn when no execErrorRate fault hit, is one after
// output too, and its error wraps ErrStreamDropped.
func (a *Adapter) ExecStream(ctx context.Context, ref string, req api.ExecRequest, emit func(api.ExecEvent) error) (adapters.ExitStatus, error) {
	if err := a.require("exec.stream", adapters.FeatureExecStream); err != nil {
		return adapters.ExitStatus{}, err
	}
	view, err := a.startExec(ref, req)
	if err != nil {
		return adapters.ExitStatus{}, err
	}
	fault := a.drawExecFault(true)
	if fault.err != nil && !fault.afterOutput {
		return adapters.ExitStatus{}, fault.err
	}
	res, err := a.command(ctx, view, req)
	if err != nil {
		return adapters.ExitStatus{}, err
	}
	events := []api.ExecEvent{{Stream: api.StreamStdout, Data: res.Stdout}, {Stream: api.StreamStderr, Data: res.Stderr}}
	if fault.err != nil {
		events = cutOutput(events, fault.cut)
	}
	for _, ev := range events {
		if ev.Data == "" {
			continue
		}
		if err := emit(ev); err != nil {
			return adapters.ExitStatus{}, err
		}
	}
	if fault.err != nil {
		return adapters.ExitStatus{}, fault.err
	}
	return adapters.ExitStatus{Code: res.ExitCode, TimedOut: res.TimedOut}, nil
}

// cutOutput keeps the first bytes of events' output: at least one, and fewer than
// all when there are two or more (share cut of the rest). Empty output stays empty,
// so a fault after output of a silent command comes before any.
func cutOutput(events []api.ExecEvent, cut float64) []api.ExecEvent {
	total := 0
	for _, ev := range events {
		total += len(ev.Data)
	}
	if total == 0 {
		return nil
	}
	keep := 1 + int(cut*float64(total-1))
	var out []api.ExecEvent
	for _, ev := range events {
		n := min(len(ev.Data), keep)
		if n == 0 {
			continue
		}
		out = append(out, api.ExecEvent{Stream: ev.Stream, Data: ev.Data[:n]})
		keep -= n
	}
	return out
}

// transition moves ref from one state to another; being in the target state already
// succeeds, which makes every lifecycle call idempotent.
func (a *Adapter) transition(ref, op string, from, to adapters.InstanceState) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	in, err := a.lookupLocked(ref)
	if err != nil {
		return err
	}
	switch in.pub.State {
	case to:
		return nil
	case from:
		in.pub.State = to
		in.pub.Message = ""
		return nil
	}
	return adapters.InvalidState("fake: cannot %s instance %s: it is %s", op, ref, in.pub.State)
}

func (a *Adapter) Stop(_ context.Context, ref string) error {
	if err := a.require("stop", adapters.FeatureStopStart); err != nil {
		return err
	}
	return a.transition(ref, "stop", adapters.StateRunning, adapters.StateStopped)
}

func (a *Adapter) Start(_ context.Context, ref string) error {
	if err := a.require("start", adapters.FeatureStopStart); err != nil {
		return err
	}
	return a.transition(ref, "start", adapters.StateStopped, adapters.StateRunning)
}

func (a *Adapter) Pause(_ context.Context, ref string) error {
	if err := a.require("pause", adapters.FeaturePauseResume); err != nil {
		return err
	}
	return a.transition(ref, "pause", adapters.StateRunning, adapters.StatePaused)
}

func (a *Adapter) Resume(_ context.Context, ref string) error {
	if err := a.require("resume", adapters.FeaturePauseResume); err != nil {
		return err
	}
	return a.transition(ref, "resume", adapters.StatePaused, adapters.StateRunning)
}

// Snapshot copies the instance's files. A stopped instance has a disk but no memory,
// so only a disk snapshot can be taken of it.
func (a *Adapter) Snapshot(_ context.Context, ref string, kind adapters.SnapshotKind) (adapters.Snapshot, error) {
	if err := kind.Validate(); err != nil {
		return adapters.Snapshot{}, err
	}
	kindFeature := adapters.FeatureSnapshotsDisk
	if kind == adapters.SnapshotMemory {
		kindFeature = adapters.FeatureSnapshotsMemory
	}
	if err := a.require("snapshot."+string(kind), kindFeature, adapters.FeatureFork); err != nil {
		return adapters.Snapshot{}, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	in, err := a.lookupLocked(ref)
	if err != nil {
		return adapters.Snapshot{}, err
	}
	ok := in.pub.State == adapters.StateRunning || in.pub.State == adapters.StatePaused ||
		in.pub.State == adapters.StateStopped && kind == adapters.SnapshotDisk
	if !ok {
		return adapters.Snapshot{}, adapters.InvalidState("fake: cannot take a %s snapshot of instance %s: it is %s", kind, ref, in.pub.State)
	}
	s := &snapshot{ref: ids.New("snap"), kind: kind, files: copyFiles(in.files)}
	a.snapshots[s.ref] = s
	var size int64
	for _, f := range s.files {
		size += int64(len(f.data))
	}
	return adapters.Snapshot{Ref: s.ref, Kind: kind, SizeBytes: size}, nil
}

func (a *Adapter) DeleteSnapshot(_ context.Context, snapshotRef string) error {
	if err := a.require("delete snapshot", adapters.FeatureSnapshotsDisk, adapters.FeatureSnapshotsMemory, adapters.FeatureFork); err != nil {
		return err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.snapshots, snapshotRef)
	return nil
}

// Snapshots counts the snapshots that exist now.
func (a *Adapter) Snapshots() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.snapshots)
}

// ExposePort returns a URL under the reserved .invalid TLD, so that nothing ever
// resolves it by accident.
func (a *Adapter) ExposePort(_ context.Context, ref string, port int) (string, error) {
	if err := a.require("ports.expose", adapters.FeaturePortsExpose); err != nil {
		return "", err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, err := a.runningLocked(ref, "expose port"); err != nil {
		return "", err
	}
	if port < 1 || port > 65535 {
		return "", adapters.InvalidRequest("fake: port %d is not in 1..65535", port)
	}
	return fmt.Sprintf("https://%s-%d.fake.invalid/", ref, port), nil
}
