package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/client"
)

// execFlags are the flags of a command run in a sandbox, shared by exec and run.
type execFlags struct {
	env     []string
	cwd     string
	stdin   bool
	timeout time.Duration
}

func addExecFlags(cmd *cobra.Command, f *execFlags) {
	fl := cmd.Flags()
	fl.StringArrayVar(&f.env, "exec-env", nil, "a `NAME=value` environment variable of the command (repeat)")
	fl.StringVar(&f.cwd, "cwd", "", "the command's working `dir`ectory in the sandbox")
	fl.BoolVarP(&f.stdin, "stdin", "i", false, "send this command's stdin to the command (read whole first)")
	fl.DurationVar(&f.timeout, "timeout", 0, "kill the command after this long; it then exits 124 (0: the pool's default)")
}

// request builds the exec request: one argument is a shell command line (run with
// /bin/sh -c), several are the program and its arguments, run without a shell.
func (a *app) request(f *execFlags, argv []string) (api.ExecRequest, error) {
	var req api.ExecRequest
	if len(argv) == 0 {
		return req, usagef("no command: give one after the sandbox ID (after -- when it has flags)")
	}
	if len(argv) == 1 {
		req.Command = argv[0]
	} else {
		req.Args = argv
	}
	env, err := pairs("--exec-env", f.env)
	if err != nil {
		return req, err
	}
	req.Env = env
	req.Cwd = f.cwd
	if f.timeout < 0 || f.timeout%time.Second != 0 {
		return req, usagef("--timeout %s: whole seconds only", f.timeout)
	}
	req.TimeoutSeconds = int(f.timeout / time.Second)
	if f.stdin {
		data, err := io.ReadAll(io.LimitReader(a.io.in, api.MaxFileBytes+1))
		if err != nil {
			return req, fmt.Errorf("reading stdin: %w", err)
		}
		if len(data) > api.MaxFileBytes {
			return req, usagef("stdin is over %d bytes", api.MaxFileBytes)
		}
		req.Stdin = string(data)
	}
	return req, nil
}

func (a *app) execCmd() *cobra.Command {
	var f execFlags
	cmd := &cobra.Command{
		Use:   "exec ID [--] COMMAND [ARG...]",
		Short: "Run a command in a sandbox, streaming its output",
		Long: `Run a command in a running sandbox. Its stdout and stderr are printed as they arrive,
each to the same stream here, and its exit code becomes differently's. One argument is
a shell command line (/bin/sh -c); several are a program and its arguments, run
without a shell. differently's own failures exit 125, a command killed by --timeout
exits 124, and Ctrl-C exits 130.

With -o json nothing is streamed: the result is printed at the end as one object
(exitCode, stdout, stderr, timedOut).`,
		Example: `  differently exec sb_01J... -- make test
  differently exec sb_01J... 'cd /work && ls | wc -l'
  echo hi | differently exec -i sb_01J... cat`,
		Args:              cobra.MinimumNArgs(1),
		ValidArgsFunction: a.completeSandboxes,
		Annotations:       map[string]string{passThrough: "true"},
		RunE: func(cmd *cobra.Command, args []string) error {
			req, err := a.request(&f, args[1:])
			if err != nil {
				return err
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			code, err := a.execute(c, args[0], req)
			if err != nil {
				return err
			}
			if code != 0 {
				return exitCode{code}
			}
			return nil
		},
	}
	cmd.Flags().SetInterspersed(false)
	addExecFlags(cmd, &f)
	return cmd
}

// execResult is what -o json prints of a command.
type execResult struct {
	ExitCode int    `json:"exitCode"`
	Stdout   string `json:"stdout"`
	Stderr   string `json:"stderr"`
	TimedOut bool   `json:"timedOut,omitempty"`
}

// execute runs req and prints its output as it arrives (or, with -o json or yaml, as
// one result at the end), returning the command's exit code.
func (a *app) execute(c *client.Client, id string, req api.ExecRequest) (int, error) {
	structured := a.output == "json" || a.output == "yaml"
	var res execResult
	var out, errOut strings.Builder
	final := false
	for ev, err := range c.ExecSandboxStream(a.ctx, id, req) {
		if err != nil {
			if a.ctx.Err() != nil {
				return 0, errInterrupted
			}
			return 0, err
		}
		switch ev.Stream {
		case api.StreamStdout:
			if structured {
				out.WriteString(ev.Data)
			} else if _, err := io.WriteString(a.io.out, ev.Data); err != nil {
				return 0, err
			}
		case api.StreamStderr:
			if structured {
				errOut.WriteString(ev.Data)
			} else if _, err := io.WriteString(a.io.err, ev.Data); err != nil {
				return 0, err
			}
		}
		if ev.ExitCode != nil {
			res.ExitCode, res.TimedOut, final = *ev.ExitCode, ev.TimedOut, true
		}
	}
	if !final {
		return 0, fmt.Errorf("%w", client.ErrStreamIncomplete)
	}
	if res.TimedOut && !structured {
		a.progress("the command was killed by its timeout")
	}
	if structured {
		res.Stdout, res.Stderr = out.String(), errOut.String()
		if err := a.emit(res, nil); err != nil {
			return 0, err
		}
	}
	return res.ExitCode, nil
}

func (a *app) runCmd() *cobra.Command {
	var cf createFlags
	var ef execFlags
	var keep bool
	cmd := &cobra.Command{
		Use:   "run [flags] [--] COMMAND [ARG...]",
		Short: "Create a sandbox, run one command in it and delete it: for CI",
		Long: `Create a sandbox, wait until it runs, run one command in it with its output streamed
as exec does, then delete the sandbox, also when the command fails or on Ctrl-C (a
second Ctrl-C stops at once, leaving the sandbox to its TTL). The exit code is the
command's; differently's own failures exit 125 and Ctrl-C 130.`,
		Example: `  differently run -- echo hello
  differently run --pool devhost --template devhost --ttl 30m -- make test
  differently run -o json 'uname -a'`,
		Args:        cobra.MinimumNArgs(1),
		Annotations: map[string]string{passThrough: "true"},
		RunE: func(cmd *cobra.Command, args []string) (err error) {
			req, err := a.request(&ef, args)
			if err != nil {
				return err
			}
			body, err := cf.body()
			if err != nil {
				return err
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			key := cf.idempotencyKey
			if key == "" {
				key = newKey()
			}
			sb, err := c.CreateSandbox(a.ctx, body, key)
			if err != nil && a.ctx.Err() != nil {
				// The create may have reached the daemon before the Ctrl-C: the same
				// key gives back the sandbox it made, if any, to delete. (When it had
				// not, this makes one, deleted at once: the price of knowing.)
				ctx, cancel := context.WithTimeout(context.WithoutCancel(a.ctx), time.Minute)
				again, rerr := c.CreateSandbox(ctx, body, key)
				cancel()
				if rerr != nil {
					a.warn("interrupted during the create, whose sandbox, if it made one, is unknown: %v", rerr)
					return errInterrupted
				}
				sb, err = again, errInterrupted
			}
			if sb == nil {
				return err
			}
			id := sb.Id
			if keep {
				a.progress("sandbox %s is kept", id)
			} else {
				defer func() {
					derr := a.cleanup(c, id)
					switch {
					case derr == nil:
					case err == nil:
						err = derr
					default:
						// The command's failure or code is the answer; the sandbox
						// left behind is said beside it.
						a.warn("%v; it expires with its TTL", derr)
					}
				}()
			}
			if err != nil {
				return err
			}
			if _, err = a.waitFor(c, sb, 0, client.Running); err != nil {
				return err
			}
			code, err := a.execute(c, id, req)
			if err != nil {
				return err
			}
			if code != 0 {
				return exitCode{code}
			}
			return nil
		},
	}
	cmd.Flags().SetInterspersed(false)
	a.addCreateFlags(cmd, &cf)
	addExecFlags(cmd, &ef)
	cmd.Flags().BoolVar(&keep, "keep", false, "keep the sandbox afterwards (its ID is printed on stderr)")
	return cmd
}

// cleanup deletes run's sandbox and waits until it is gone. It runs after a Ctrl-C
// too, when the signal's context is done, so it has a context of its own.
func (a *app) cleanup(c *client.Client, id string) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(a.ctx), time.Minute)
	defer cancel()
	sp := a.spin("deleting sandbox " + id)
	_, err := c.DeleteSandboxAndWait(ctx, id)
	sp.end()
	if err != nil {
		return fmt.Errorf("deleting sandbox %s: %w", id, err)
	}
	return nil
}

// apiError reads an error answer of a call made through the generated client.
func apiError(resp *http.Response, body []byte) error {
	if resp == nil {
		return errors.New("no answer")
	}
	e := &client.APIError{Status: resp.StatusCode, Message: http.StatusText(resp.StatusCode)}
	var env api.ErrorEnvelope
	if json.Unmarshal(body, &env) == nil && env.Error != nil {
		e.Code, e.Message, e.Details = env.Error.Code, env.Error.Message, env.Error.Details
	}
	return e
}

// readAllLimited reads a file's worth of bytes, refusing more than the API takes.
func readAllLimited(r io.Reader) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, api.MaxFileBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > api.MaxFileBytes {
		return nil, usagef("the file is over %d bytes, the most the API takes", api.MaxFileBytes)
	}
	return data, nil
}

// strictJSON decodes data into v, refusing fields v does not have: a typo in a policy
// file must not pass as an empty policy.
func strictJSON(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}
