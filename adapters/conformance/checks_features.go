package conformance

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/api"
)

// requireFeature skips a check for a feature the adapter does not serve; whether it
// then refuses the operation is checkUndeclared's business.
func (s *suite) requireFeature(feature string) error {
	if !s.has(feature) {
		return skipf("%s is not declared", feature)
	}
	return nil
}

func collectStream(ctx context.Context, st adapters.Streamer, ref string, req api.ExecRequest) (stdout, stderr string, status adapters.ExitStatus, err error) {
	var out, errOut strings.Builder
	var bad error
	status, err = st.ExecStream(ctx, ref, req, func(ev api.ExecEvent) error {
		switch {
		case ev.IsFinal():
			bad = errors.New("ExecStream emitted a final event; the caller sends it")
		case ev.Stream == api.StreamStdout:
			out.WriteString(ev.Data)
		case ev.Stream == api.StreamStderr:
			errOut.WriteString(ev.Data)
		default:
			bad = fmt.Errorf("event with unknown stream %q", ev.Stream)
		}
		return nil
	})
	if err == nil {
		err = bad
	}
	return out.String(), errOut.String(), status, err
}

func checkStream(ctx context.Context, s *suite) error {
	if err := s.requireFeature(adapters.FeatureExecStream); err != nil {
		return err
	}
	st := s.a.(adapters.Streamer)
	main, err := s.mainInstance(ctx)
	if err != nil {
		return err
	}
	// Streamed and buffered output of one command must agree, simulated or not.
	req := api.ExecRequest{Command: "echo streamed"}
	buffered, err := s.exec(ctx, main.Ref, req)
	if err != nil {
		return err
	}
	stdout, _, status, err := collectStream(ctx, st, main.Ref, req)
	if err != nil {
		return fmt.Errorf("stream: %w", err)
	}
	if stdout != buffered.Stdout || status.Code != buffered.ExitCode {
		return fmt.Errorf("streamed stdout %q exit %d differ from exec's %q exit %d", stdout, status.Code, buffered.Stdout, buffered.ExitCode)
	}
	if s.opts.SimulatedExec {
		return nil
	}
	stdout, stderr, status, err := collectStream(ctx, st, main.Ref, api.ExecRequest{Command: "echo out; echo err >&2; exit 7"})
	if err != nil {
		return fmt.Errorf("stream: %w", err)
	}
	if stdout != "out\n" || stderr != "err\n" || status.Code != 7 {
		return fmt.Errorf("stream: stdout %q stderr %q exit %d, want %q %q 7", stdout, stderr, status.Code, "out\n", "err\n")
	}
	return nil
}

// checkStreamBytes: an adapter with the ByteStreamer fast path must stream through
// it what ExecStream streams, and stop the command when emit fails.
func checkStreamBytes(ctx context.Context, s *suite) error {
	if err := s.requireFeature(adapters.FeatureExecStream); err != nil {
		return err
	}
	bs, ok := s.a.(adapters.ByteStreamer)
	if !ok {
		return skipf("the adapter has no ExecStreamBytes")
	}
	main, err := s.mainInstance(ctx)
	if err != nil {
		return err
	}
	req := api.ExecRequest{Command: "echo out; echo err >&2; exit 7"}
	if s.opts.SimulatedExec {
		req = api.ExecRequest{Command: "echo streamed"}
	}
	stdout, stderr, status, err := collectStream(ctx, bs, main.Ref, req)
	if err != nil {
		return fmt.Errorf("stream: %w", err)
	}
	var out, errOut bytes.Buffer
	var bad error
	bstatus, err := bs.ExecStreamBytes(ctx, main.Ref, req, func(stream string, data []byte) error {
		switch stream {
		case api.StreamStdout:
			out.Write(data)
		case api.StreamStderr:
			errOut.Write(data)
		default:
			bad = fmt.Errorf("output on unknown stream %q", stream)
		}
		return nil
	})
	if err == nil {
		err = bad
	}
	if err != nil {
		return fmt.Errorf("ExecStreamBytes: %w", err)
	}
	if out.String() != stdout || errOut.String() != stderr || bstatus != status {
		return fmt.Errorf("ExecStreamBytes gave stdout %q stderr %q %+v, ExecStream %q %q %+v",
			out.String(), errOut.String(), bstatus, stdout, stderr, status)
	}
	_, err = bs.ExecStreamBytes(ctx, main.Ref, api.ExecRequest{Command: "echo first; sleep 600"},
		func(string, []byte) error { return errStopStream })
	if !errors.Is(err, errStopStream) {
		return fmt.Errorf("ExecStreamBytes returned %v, want the error emit returned", err)
	}
	return nil
}

var errStopStream = errors.New("conformance: the consumer stopped reading")

// checkPTY: a command on a terminal sees one, of the size asked for, reads keys
// typed on it, and ends the exec with its exit code.
func checkPTY(ctx context.Context, s *suite) error {
	if err := s.requireFeature(adapters.FeaturePTY); err != nil {
		return err
	}
	if s.opts.SimulatedExec {
		return skipf("commands are simulated")
	}
	pe := s.a.(adapters.PTYExec)
	main, err := s.mainInstance(ctx)
	if err != nil {
		return err
	}
	input := make(chan []byte, 1)
	var out strings.Builder
	sent := false
	status, err := pe.ExecPTY(ctx, main.Ref, api.ExecRequest{Command: `test -t 0 && test -t 1 && stty size; read -r l; echo "got $l"; exit 3`},
		adapters.TermSize{Cols: 77, Rows: 22}, input, nil, func(_ string, data []byte) error {
			out.Write(data)
			if !sent && strings.Contains(out.String(), "22 77") {
				sent = true
				input <- []byte("typed\r")
			}
			return nil
		})
	if err != nil {
		return fmt.Errorf("ExecPTY: %w", err)
	}
	got := strings.ReplaceAll(out.String(), "\r\n", "\n")
	if !strings.Contains(got, "22 77\n") || !strings.Contains(got, "got typed\n") || status.Code != 3 {
		return fmt.Errorf("ExecPTY: output %q exit %d, want the size 22 77, \"got typed\" and exit 3", got, status.Code)
	}
	return nil
}

// checkStdin: input fed while a command runs reaches it in order, an answer can
// come before the next input is sent, closing the channel is end of file, and a
// command that ends with stdin open ends the exec.
func checkStdin(ctx context.Context, s *suite) error {
	if err := s.requireFeature(adapters.FeatureExecStdin); err != nil {
		return err
	}
	if s.opts.SimulatedExec {
		return skipf("commands are simulated")
	}
	ss := s.a.(adapters.StdinStreamer)
	main, err := s.mainInstance(ctx)
	if err != nil {
		return err
	}
	stdin := make(chan []byte, 1)
	stdin <- []byte("a\n")
	var out strings.Builder
	status, err := ss.ExecStdin(ctx, main.Ref, api.ExecRequest{Command: `while read l; do echo "got $l"; done; echo bye`}, stdin,
		func(stream string, data []byte) error {
			if stream != api.StreamStdout {
				return nil
			}
			out.Write(data)
			switch out.String() {
			case "got a\n":
				stdin <- []byte("b\n") // only after the answer to the first line
			case "got a\ngot b\n":
				close(stdin)
			}
			return nil
		})
	if err != nil {
		return fmt.Errorf("ExecStdin: %w", err)
	}
	if out.String() != "got a\ngot b\nbye\n" || status.Code != 0 {
		return fmt.Errorf("ExecStdin: stdout %q exit %d, want %q 0", out.String(), status.Code, "got a\ngot b\nbye\n")
	}
	open := make(chan []byte, 1)
	open <- []byte("first\nsecond\n")
	out.Reset()
	status, err = ss.ExecStdin(ctx, main.Ref, api.ExecRequest{Command: "head -n1; exit 3"}, open,
		func(_ string, data []byte) error { out.Write(data); return nil })
	if err != nil || out.String() != "first\n" || status.Code != 3 {
		return fmt.Errorf("a command that ends with stdin open: stdout %q exit %d, %v; want %q 3", out.String(), status.Code, err, "first\n")
	}
	return nil
}

// checkStreamEmitError: a consumer that goes away must stop the command. An adapter
// that keeps running it hangs until the check's deadline.
func checkStreamEmitError(ctx context.Context, s *suite) error {
	if err := s.requireFeature(adapters.FeatureExecStream); err != nil {
		return err
	}
	main, err := s.mainInstance(ctx)
	if err != nil {
		return err
	}
	_, err = s.a.(adapters.Streamer).ExecStream(ctx, main.Ref, api.ExecRequest{Command: "echo first; sleep 600"},
		func(api.ExecEvent) error { return errStopStream })
	if !errors.Is(err, errStopStream) {
		return fmt.Errorf("ExecStream returned %v, want the error emit returned", err)
	}
	return nil
}

func checkFiles(ctx context.Context, s *suite) error {
	if err := s.requireFeature(adapters.FeatureFiles); err != nil {
		return err
	}
	fs := s.a.(adapters.FileSystem)
	main, err := s.mainInstance(ctx)
	if err != nil {
		return err
	}
	dir := s.path("conformance-files")
	file := dir + "/nested/data.bin"
	data := make([]byte, 3*256)
	for i := range data {
		data[i] = byte(i)
	}
	if err := fs.WriteFile(ctx, main.Ref, file, data); err != nil {
		return fmt.Errorf("write %s (parents must be created): %w", file, err)
	}
	got, err := fs.ReadFile(ctx, main.Ref, file)
	if err != nil {
		return fmt.Errorf("read %s: %w", file, err)
	}
	if !bytes.Equal(got, data) {
		return fmt.Errorf("read back %d bytes that differ from the %d written", len(got), len(data))
	}
	if err := fs.WriteFile(ctx, main.Ref, file, []byte("short")); err != nil {
		return fmt.Errorf("overwrite: %w", err)
	}
	if got, err := fs.ReadFile(ctx, main.Ref, file); err != nil || string(got) != "short" {
		return fmt.Errorf("after overwrite read %q, %v; want %q", got, err, "short")
	}
	entries, err := fs.ListFiles(ctx, main.Ref, dir+"/nested")
	if err != nil {
		return fmt.Errorf("list %s: %w", dir+"/nested", err)
	}
	if i := slices.IndexFunc(entries, func(e adapters.FileInfo) bool { return e.Name == "data.bin" }); i < 0 {
		return fmt.Errorf("listing %v lacks data.bin", entries)
	} else if e := entries[i]; e.IsDir || (e.Size != 0 && e.Size != 5) {
		return fmt.Errorf("data.bin listed as dir=%v size=%d, want a 5 byte file", e.IsDir, e.Size)
	}
	entries, err = fs.ListFiles(ctx, main.Ref, dir)
	if err != nil {
		return fmt.Errorf("list %s: %w", dir, err)
	}
	if !slices.ContainsFunc(entries, func(e adapters.FileInfo) bool { return e.Name == "nested" && e.IsDir }) {
		return fmt.Errorf("listing of %s %v lacks directory nested", dir, entries)
	}
	if _, err := fs.ReadFile(ctx, main.Ref, dir+"/missing"); expectCode(err, api.CodeNotFound, "read of a missing file") != nil {
		return expectCode(err, api.CodeNotFound, "read of a missing file")
	}
	if s.opts.SimulatedExec {
		return nil
	}
	// Files and exec see one filesystem.
	return s.expectOutput(ctx, api.ExecRequest{Command: fmt.Sprintf("cat '%s'", file)}, 0, "short")
}

// writeMarker leaves a recognisable file in an instance, through files or a shell.
// It returns false when the adapter offers neither.
func (s *suite) writeMarker(ctx context.Context, ref, content string) (bool, error) {
	name := s.path("conformance-marker")
	if s.has(adapters.FeatureFiles) {
		return true, s.a.(adapters.FileSystem).WriteFile(ctx, ref, name, []byte(content))
	}
	if s.opts.SimulatedExec {
		return false, nil
	}
	_, err := s.exec(ctx, ref, api.ExecRequest{Command: fmt.Sprintf("printf '%%s' '%s' > '%s'", content, name)})
	return true, err
}

func (s *suite) readMarker(ctx context.Context, ref string) (string, error) {
	name := s.path("conformance-marker")
	if s.has(adapters.FeatureFiles) {
		b, err := s.a.(adapters.FileSystem).ReadFile(ctx, ref, name)
		return string(b), err
	}
	res, err := s.exec(ctx, ref, api.ExecRequest{Command: fmt.Sprintf("cat '%s'", name)})
	return res.Stdout, err
}

func (s *suite) expectState(ctx context.Context, ref string, want adapters.InstanceState) error {
	inst, err := s.a.Get(ctx, ref)
	if err != nil {
		return fmt.Errorf("get %s: %w", ref, err)
	}
	if inst.State != want {
		return fmt.Errorf("instance %s is %q, want %q", ref, inst.State, want)
	}
	return nil
}

// expectListed checks that List shows ref in state want: it lists every instance in
// any non-deleted state, and the reconciler takes a missing one for lost.
func (s *suite) expectListed(ctx context.Context, ref string, want adapters.InstanceState) error {
	list, err := s.a.List(ctx, s.opts.Installation)
	if err != nil {
		return fmt.Errorf("list: %w", err)
	}
	for _, inst := range list {
		if inst.Ref == ref {
			if inst.State != want {
				return fmt.Errorf("list shows %s %q, want %q", ref, inst.State, want)
			}
			return nil
		}
	}
	return fmt.Errorf("list does not show %s while it is %s: List returns instances in every non-deleted state", ref, want)
}

// transition calls op twice (the second must be a no-op) and checks the state after.
func (s *suite) transition(ctx context.Context, name string, op func(context.Context, string) error, ref string, want adapters.InstanceState) error {
	for i := range 2 {
		if err := op(ctx, ref); err != nil {
			return fmt.Errorf("%s (call %d; a repeated call must succeed): %w", name, i+1, err)
		}
	}
	return s.expectState(ctx, ref, want)
}

func checkStopStart(ctx context.Context, s *suite) error {
	if err := s.requireFeature(adapters.FeatureStopStart); err != nil {
		return err
	}
	lc := s.a.(adapters.Lifecycle)
	inst, err := s.create(ctx, s.request(s.opts.Installation))
	if err != nil {
		return err
	}
	marked, err := s.writeMarker(ctx, inst.Ref, "kept across stop")
	if err != nil {
		return fmt.Errorf("write marker: %w", err)
	}
	if err := s.transition(ctx, "stop", lc.Stop, inst.Ref, adapters.StateStopped); err != nil {
		return err
	}
	if err := s.expectListed(ctx, inst.Ref, adapters.StateStopped); err != nil {
		return err
	}
	if _, err := s.a.Exec(ctx, inst.Ref, api.ExecRequest{Command: "true"}); expectCode(err, api.CodeInvalidState, "exec on a stopped instance") != nil {
		return expectCode(err, api.CodeInvalidState, "exec on a stopped instance")
	}
	if err := s.transition(ctx, "start", lc.Start, inst.Ref, adapters.StateRunning); err != nil {
		return err
	}
	if _, err := s.exec(ctx, inst.Ref, api.ExecRequest{Command: "true"}); err != nil {
		return fmt.Errorf("after start: %w", err)
	}
	if !marked || !s.has(adapters.FeaturePersistenceDisk) {
		return nil
	}
	got, err := s.readMarker(ctx, inst.Ref)
	if err != nil || got != "kept across stop" {
		return fmt.Errorf("persistence.disk: marker after stop and start reads %q, %v", got, err)
	}
	return nil
}

func checkPauseResume(ctx context.Context, s *suite) error {
	if err := s.requireFeature(adapters.FeaturePauseResume); err != nil {
		return err
	}
	p := s.a.(adapters.Pauser)
	inst, err := s.create(ctx, s.request(s.opts.Installation))
	if err != nil {
		return err
	}
	if err := s.transition(ctx, "pause", p.Pause, inst.Ref, adapters.StatePaused); err != nil {
		return err
	}
	if err := s.expectListed(ctx, inst.Ref, adapters.StatePaused); err != nil {
		return err
	}
	if _, err := s.a.Exec(ctx, inst.Ref, api.ExecRequest{Command: "true"}); expectCode(err, api.CodeInvalidState, "exec on a paused instance") != nil {
		return expectCode(err, api.CodeInvalidState, "exec on a paused instance")
	}
	if err := s.transition(ctx, "resume", p.Resume, inst.Ref, adapters.StateRunning); err != nil {
		return err
	}
	if _, err := s.exec(ctx, inst.Ref, api.ExecRequest{Command: "true"}); err != nil {
		return fmt.Errorf("after resume: %w", err)
	}
	return nil
}

// snapshotAndRestore snapshots an instance holding a marker and creates a new instance
// from the snapshot. It returns the source and restored refs.
func (s *suite) snapshotAndRestore(ctx context.Context, kind adapters.SnapshotKind) (src, restored string, marked bool, err error) {
	sn := s.a.(adapters.Snapshotter)
	inst, err := s.create(ctx, s.request(s.opts.Installation))
	if err != nil {
		return "", "", false, err
	}
	if marked, err = s.writeMarker(ctx, inst.Ref, "before snapshot"); err != nil {
		return "", "", false, fmt.Errorf("write marker: %w", err)
	}
	snap, err := sn.Snapshot(ctx, inst.Ref, kind)
	if err != nil {
		return "", "", false, fmt.Errorf("snapshot %s: %w", kind, err)
	}
	s.mu.Lock()
	s.snapshots = append(s.snapshots, snap.Ref)
	s.mu.Unlock()
	// A memory snapshot holds the disk too, so it may answer a disk request.
	if snap.Ref == "" || snap.Kind != kind && !(kind == adapters.SnapshotDisk && snap.Kind == adapters.SnapshotMemory) {
		return "", "", false, fmt.Errorf("snapshot returned ref %q kind %q for a %s request", snap.Ref, snap.Kind, kind)
	}
	req := s.request(s.opts.Installation)
	req.FromSnapshot = snap.Ref
	restoredInst, err := s.create(ctx, req)
	if err != nil {
		return "", "", false, fmt.Errorf("restore: %w", err)
	}
	if marked {
		got, err := s.readMarker(ctx, restoredInst.Ref)
		if err != nil || got != "before snapshot" {
			return "", "", false, fmt.Errorf("restored instance's marker reads %q, %v; want the snapshot's data", got, err)
		}
	}
	for range 2 {
		if err := sn.DeleteSnapshot(ctx, snap.Ref); err != nil {
			return "", "", false, fmt.Errorf("delete snapshot (twice, idempotent): %w", err)
		}
	}
	req = s.request(s.opts.Installation)
	req.FromSnapshot = snap.Ref
	if gone, err := s.a.Create(ctx, req); err == nil {
		s.mu.Lock()
		s.created[gone.Ref] = req.Installation
		s.mu.Unlock()
		return "", "", false, errors.New("create from a deleted snapshot succeeded; want invalid_request")
	} else if e := expectCode(err, api.CodeInvalidRequest, "create from a deleted snapshot"); e != nil {
		return "", "", false, e
	}
	return inst.Ref, restoredInst.Ref, marked, nil
}

func checkSnapshot(kind adapters.SnapshotKind, feature string) func(context.Context, *suite) error {
	return func(ctx context.Context, s *suite) error {
		if err := s.requireFeature(feature); err != nil {
			return err
		}
		_, _, _, err := s.snapshotAndRestore(ctx, kind)
		return err
	}
}

// checkFork: a fork is independent of its source once made.
func checkFork(ctx context.Context, s *suite) error {
	if err := s.requireFeature(adapters.FeatureFork); err != nil {
		return err
	}
	kind := adapters.SnapshotDisk
	if !s.has(adapters.FeatureSnapshotsDisk) {
		kind = adapters.SnapshotMemory
	}
	src, fork, marked, err := s.snapshotAndRestore(ctx, kind)
	if err != nil || !marked {
		return err
	}
	if _, err := s.writeMarker(ctx, fork, "changed in the fork"); err != nil {
		return fmt.Errorf("write in fork: %w", err)
	}
	if got, err := s.readMarker(ctx, src); err != nil || got != "before snapshot" {
		return fmt.Errorf("writing to the fork changed its source: source reads %q, %v", got, err)
	}
	return nil
}

func checkPorts(ctx context.Context, s *suite) error {
	if err := s.requireFeature(adapters.FeaturePortsExpose); err != nil {
		return err
	}
	pe := s.a.(adapters.PortExposer)
	main, err := s.mainInstance(ctx)
	if err != nil {
		return err
	}
	raw, err := pe.ExposePort(ctx, main.Ref, 8080)
	if err != nil {
		return fmt.Errorf("expose 8080: %w", err)
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("expose returned %q, want an http(s) URL", raw)
	}
	_, err = pe.ExposePort(ctx, main.Ref, 0)
	return expectCode(err, api.CodeInvalidRequest, "expose port 0")
}

// checkUndeclared calls every optional operation whose interface the adapter has but
// whose feature it does not declare. Each must answer unsupported_operation.
func checkUndeclared(ctx context.Context, s *suite) error {
	main, err := s.mainInstance(ctx)
	if err != nil {
		return err
	}
	ref := main.Ref
	type probe struct {
		feature string
		call    func() (bool, error) // false: the interface is missing
	}
	probes := []probe{
		{adapters.FeatureExecStream, func() (bool, error) {
			st, ok := s.a.(adapters.Streamer)
			if !ok {
				return false, nil
			}
			_, err := st.ExecStream(ctx, ref, api.ExecRequest{Command: "true"}, func(api.ExecEvent) error { return nil })
			return true, err
		}},
		{adapters.FeatureExecStdin, func() (bool, error) {
			ss, ok := s.a.(adapters.StdinStreamer)
			if !ok {
				return false, nil
			}
			in := make(chan []byte)
			close(in)
			_, err := ss.ExecStdin(ctx, ref, api.ExecRequest{Command: "true"}, in, func(string, []byte) error { return nil })
			return true, err
		}},
		{adapters.FeaturePTY, func() (bool, error) {
			pe, ok := s.a.(adapters.PTYExec)
			if !ok {
				return false, nil
			}
			_, err := pe.ExecPTY(ctx, ref, api.ExecRequest{Command: "true"}, adapters.TermSize{Cols: 80, Rows: 24}, nil, nil,
				func(string, []byte) error { return nil })
			return true, err
		}},
		{adapters.FeatureFiles, func() (bool, error) {
			fs, ok := s.a.(adapters.FileSystem)
			if !ok {
				return false, nil
			}
			_, err := fs.ListFiles(ctx, ref, s.path("."))
			return true, err
		}},
		{adapters.FeaturePortsExpose, func() (bool, error) {
			pe, ok := s.a.(adapters.PortExposer)
			if !ok {
				return false, nil
			}
			_, err := pe.ExposePort(ctx, ref, 8080)
			return true, err
		}},
		{adapters.FeatureSnapshotsMemory, func() (bool, error) {
			sn, ok := s.a.(adapters.Snapshotter)
			if !ok {
				return false, nil
			}
			snap, err := sn.Snapshot(ctx, ref, adapters.SnapshotMemory)
			if err == nil {
				_ = sn.DeleteSnapshot(ctx, snap.Ref)
			}
			return true, err
		}},
		{adapters.FeatureSnapshotsDisk, func() (bool, error) {
			sn, ok := s.a.(adapters.Snapshotter)
			if !ok || s.has(adapters.FeatureSnapshotsMemory) { // a memory snapshot may answer for disk
				return false, nil
			}
			snap, err := sn.Snapshot(ctx, ref, adapters.SnapshotDisk)
			if err == nil {
				_ = sn.DeleteSnapshot(ctx, snap.Ref)
			}
			return true, err
		}},
		// State-changing probes last: if they wrongly succeed, the shared instance
		// is no longer running.
		{adapters.FeaturePauseResume, func() (bool, error) {
			p, ok := s.a.(adapters.Pauser)
			if !ok {
				return false, nil
			}
			return true, p.Pause(ctx, ref)
		}},
		{adapters.FeatureStopStart, func() (bool, error) {
			lc, ok := s.a.(adapters.Lifecycle)
			if !ok {
				return false, nil
			}
			return true, lc.Stop(ctx, ref)
		}},
	}
	var errs []error
	var probed int
	for _, p := range probes {
		if s.has(p.feature) {
			continue
		}
		implemented, err := p.call()
		if !implemented {
			continue
		}
		probed++
		if e := expectCode(err, api.CodeUnsupportedOperation, "undeclared "+p.feature); e != nil {
			errs = append(errs, e)
		}
	}
	if len(errs) == 0 && probed == 0 {
		return skipf("every optional interface the adapter implements is declared")
	}
	return errors.Join(errs...)
}
