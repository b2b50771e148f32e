package conformance

import (
	"context"
	"fmt"
	"strings"

	"github.com/different-ai/differently/api"
)

// execMain runs req on the shared instance.
func (s *suite) execMain(ctx context.Context, req api.ExecRequest) (api.ExecResult, error) {
	main, err := s.mainInstance(ctx)
	if err != nil {
		return api.ExecResult{}, err
	}
	return s.exec(ctx, main.Ref, req)
}

// expectOutput runs a command and compares its exit code and stdout.
func (s *suite) expectOutput(ctx context.Context, req api.ExecRequest, code int, stdout string) error {
	res, err := s.execMain(ctx, req)
	if err != nil {
		return err
	}
	if res.ExitCode != code || res.Stdout != stdout {
		return fmt.Errorf("exec %q: exit %d stdout %q (stderr %q), want exit %d stdout %q",
			describe(req), res.ExitCode, res.Stdout, res.Stderr, code, stdout)
	}
	return nil
}

func checkExecStdout(ctx context.Context, s *suite) error {
	if s.opts.SimulatedExec {
		// Even a simulator answers a result with exit 0 for a plain command.
		res, err := s.execMain(ctx, api.ExecRequest{Command: "echo hello"})
		if err != nil {
			return err
		}
		if res.ExitCode != 0 {
			return fmt.Errorf("simulated exec exited %d", res.ExitCode)
		}
		return nil
	}
	return s.expectOutput(ctx, api.ExecRequest{Command: "echo hello"}, 0, "hello\n")
}

func checkExecArgs(ctx context.Context, s *suite) error {
	if err := s.needShell(); err != nil {
		return err
	}
	// The argument holds shell syntax: run without a shell it is printed verbatim.
	return s.expectOutput(ctx, api.ExecRequest{Args: []string{"printf", "%s", "a b; $HOME"}}, 0, "a b; $HOME")
}

func checkExecExitCode(ctx context.Context, s *suite) error {
	if err := s.needShell(); err != nil {
		return err
	}
	return s.expectOutput(ctx, api.ExecRequest{Command: "echo partial; exit 3"}, 3, "partial\n")
}

func checkExecStderr(ctx context.Context, s *suite) error {
	if err := s.needShell(); err != nil {
		return err
	}
	res, err := s.execMain(ctx, api.ExecRequest{Command: "echo out; echo err >&2"})
	if err != nil {
		return err
	}
	if res.Stdout == "out\n" && res.Stderr == "err\n" {
		return nil
	}
	if strings.Contains(res.Stdout, "err") && res.Stderr == "" && s.a.Info().Description != "" {
		return skipf("combined output, documented as a deviation: %s", s.a.Info().Description)
	}
	return fmt.Errorf("stdout %q stderr %q, want %q and %q", res.Stdout, res.Stderr, "out\n", "err\n")
}

func checkExecEnv(ctx context.Context, s *suite) error {
	if err := s.needShell(); err != nil {
		return err
	}
	req := api.ExecRequest{
		Command: `printf '%s|%s' "$CONFORMANCE_BASE" "$CONFORMANCE_REQ"`,
		Env:     map[string]string{"CONFORMANCE_REQ": "from exec"},
	}
	if err := s.expectOutput(ctx, req, 0, "from-create|from exec"); err != nil {
		return err
	}
	// The exec's env overrides the instance's.
	req = api.ExecRequest{Command: `printf '%s' "$CONFORMANCE_BASE"`, Env: map[string]string{"CONFORMANCE_BASE": "override"}}
	return s.expectOutput(ctx, req, 0, "override")
}

func checkExecCwd(ctx context.Context, s *suite) error {
	if err := s.needShell(); err != nil {
		return err
	}
	dir := s.path("conformance-cwd")
	if err := s.expectOutput(ctx, api.ExecRequest{Command: fmt.Sprintf("mkdir -p '%s' && echo marker > '%s/m'", dir, dir)}, 0, ""); err != nil {
		return err
	}
	return s.expectOutput(ctx, api.ExecRequest{Command: "cat m", Cwd: dir}, 0, "marker\n")
}

func checkExecStdin(ctx context.Context, s *suite) error {
	if err := s.needShell(); err != nil {
		return err
	}
	res, err := s.execMain(ctx, api.ExecRequest{Command: "cat", Stdin: "line one\nline two\n"})
	if api.IsCode(err, api.CodeUnsupportedOperation) {
		return skipf("stdin answered unsupported_operation, a documented deviation")
	}
	if err != nil {
		return err
	}
	if res.Stdout != "line one\nline two\n" {
		return fmt.Errorf("cat with stdin printed %q", res.Stdout)
	}
	return nil
}

// checkExecTimeout relies on the check's own deadline: an adapter that ignores
// timeoutSeconds keeps sleeping until the check times out and fails.
func checkExecTimeout(ctx context.Context, s *suite) error {
	if err := s.needShell(); err != nil {
		return err
	}
	res, err := s.execMain(ctx, api.ExecRequest{Command: "sleep 600", TimeoutSeconds: 1})
	if err != nil {
		return fmt.Errorf("a timeout is a result, not an error: %w", err)
	}
	if !res.TimedOut || res.ExitCode != api.TimeoutExitCode {
		return fmt.Errorf("timed-out exec: timedOut %v exit %d, want true and %d", res.TimedOut, res.ExitCode, api.TimeoutExitCode)
	}
	return nil
}

func checkExecOutputCap(ctx context.Context, s *suite) error {
	if err := s.needShell(); err != nil {
		return err
	}
	n := api.MaxExecOutputBytes + api.MaxExecOutputBytes/2
	res, err := s.execMain(ctx, api.ExecRequest{Command: fmt.Sprintf("head -c %d /dev/zero | tr '\\000' a", n)})
	if err != nil {
		return err
	}
	if !res.Truncated {
		return fmt.Errorf("%d bytes of stdout came back as %d bytes without truncated set", n, len(res.Stdout))
	}
	if len(res.Stdout) > api.MaxExecOutputBytes {
		return fmt.Errorf("stdout is %d bytes, over the %d byte cap", len(res.Stdout), api.MaxExecOutputBytes)
	}
	return nil
}

func checkExecInvalid(ctx context.Context, s *suite) error {
	main, err := s.mainInstance(ctx)
	if err != nil {
		return err
	}
	_, err = s.a.Exec(ctx, main.Ref, api.ExecRequest{Command: "true", Args: []string{"true"}})
	if e := expectCode(err, api.CodeInvalidRequest, "exec with both command and args"); e != nil {
		return e
	}
	_, err = s.a.Exec(ctx, main.Ref, api.ExecRequest{})
	return expectCode(err, api.CodeInvalidRequest, "exec with neither command nor args")
}

func checkExecMissing(ctx context.Context, s *suite) error {
	ref, err := s.deletedRef(ctx)
	if err != nil {
		return err
	}
	_, err = s.a.Exec(ctx, ref, api.ExecRequest{Command: "true"})
	return expectCode(err, api.CodeNotFound, "exec on a deleted instance")
}

// deletedRef returns the ref of an instance that existed and was deleted: the one
// kind of missing ref every backend can be asked about.
func (s *suite) deletedRef(ctx context.Context) (string, error) {
	inst, err := s.create(ctx, s.request(s.opts.Installation))
	if err != nil {
		return "", err
	}
	if err := s.a.Delete(ctx, inst.Ref); err != nil {
		return "", fmt.Errorf("delete: %w", err)
	}
	return inst.Ref, nil
}
