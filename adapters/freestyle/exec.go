package freestyle

import (
	"context"
	"encoding/base64"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/adapters/httpx"
	"github.com/different-ai/differently/api"
)

// EnvFile holds the sandbox's env inside the VM. Every exec sources it, so commands
// see the env given at Create; Freestyle has no per-VM environment of its own.
const EnvFile = "/etc/differently/env"

// MaxExecTimeout is the longest exec-await accepts. Requests for longer, and requests
// with no timeout, run with this one.
const MaxExecTimeout = 300 * time.Second

// checkEnvNames accepts names a POSIX shell can export: the env reaches commands
// through a sourced file and export lines, so any other name would break them.
func checkEnvNames(env map[string]string) error {
	for k := range env {
		for i, r := range k {
			ok := r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || i > 0 && r >= '0' && r <= '9'
			if !ok {
				return adapters.InvalidRequest("freestyle: env name %q is not a shell identifier ([A-Za-z_][A-Za-z0-9_]*)", k)
			}
		}
	}
	return nil
}

// quote makes s one single-quoted shell word.
func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// exports renders env as export lines, in name order so the output is stable.
func exports(env map[string]string) string {
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	for _, k := range keys {
		b.WriteString("export " + k + "=" + quote(env[k]) + "\n")
	}
	return b.String()
}

// script is the command sent to exec-await: source the sandbox env, export the
// request's env over it (the request wins), change directory, then replace the shell
// with /bin/sh -c Command, or with Args run directly, each argument quoted so none is
// read as shell syntax.
func script(req api.ExecRequest) string {
	var b strings.Builder
	b.WriteString("if [ -r " + EnvFile + " ]; then . " + EnvFile + "; fi\n")
	b.WriteString(exports(req.Env))
	if req.Cwd != "" {
		b.WriteString("cd " + quote(req.Cwd) + " && ")
	}
	if req.Command != "" {
		b.WriteString("exec /bin/sh -c " + quote(req.Command))
	} else {
		words := make([]string, len(req.Args))
		for i, arg := range req.Args {
			words[i] = quote(arg)
		}
		b.WriteString("exec " + strings.Join(words, " "))
	}
	return b.String()
}

type execBody struct {
	Command   string            `json:"command"`
	TimeoutMs int64             `json:"timeoutMs"`
	Env       map[string]string `json:"env,omitempty"`
	Stdin     string            `json:"stdin,omitempty"`
}

// Exec runs the command through exec-await. Output over api.MaxExecOutputBytes per
// stream is cut and Truncated set; a timeout is exit 124 with TimedOut set.
func (a *Adapter) Exec(ctx context.Context, ref string, req api.ExecRequest) (api.ExecResult, error) {
	if err := req.Validate(); err != nil {
		return api.ExecResult{}, err
	}
	if err := checkEnvNames(req.Env); err != nil {
		return api.ExecResult{}, err
	}
	if err := a.requireRunning(ctx, ref); err != nil {
		return api.ExecResult{}, err
	}
	timeout := MaxExecTimeout
	if t := time.Duration(req.TimeoutSeconds) * time.Second; t > 0 && t < timeout {
		timeout = t
	}
	// The env also goes in the body, so the process has it from the start; the export
	// lines put it back over whatever the sourced env file set.
	body := execBody{Command: script(req), TimeoutMs: timeout.Milliseconds(), Env: req.Env}
	if req.Stdin != "" {
		body.Stdin = base64.StdEncoding.EncodeToString([]byte(req.Stdin))
	}
	start := time.Now()
	// The answer is {stdout, stderr, statusCode}: the output is read as it arrives,
	// keeping what the cap allows, so output of any size is a result. statusCode is
	// null when Freestyle killed the command at its timeout.
	var stdout, stderr adapters.OutputBuffer
	var status *int
	err := a.c.JSONObject(ctx, http.MethodPost, vmPath(ref, "exec-await"), nil, body, httpx.MaxExecAnswer, httpx.Fields{
		Strings: map[string]io.Writer{"stdout": &stdout, "stderr": &stderr},
		Values:  map[string]any{"statusCode": &status},
	})
	if err != nil {
		return api.ExecResult{}, err
	}
	res := api.ExecResult{
		Stdout: stdout.String(), Stderr: stderr.String(),
		Truncated:  stdout.Truncated() || stderr.Truncated(),
		DurationMs: time.Since(start).Milliseconds(),
	}
	if status == nil {
		res.ExitCode, res.TimedOut = api.TimeoutExitCode, true
	} else {
		res.ExitCode = *status
	}
	return res, nil
}

// requireRunning answers invalid_state unless the VM runs. It is checked before
// exec and file calls rather than left to Freestyle, whose answer for a stopped or
// paused VM the notes do not give (it might wake the VM instead).
func (a *Adapter) requireRunning(ctx context.Context, ref string) error {
	vm, err := a.get(ctx, ref)
	if err != nil {
		return err
	}
	if vm.State != "running" {
		return adapters.InvalidState("freestyle: VM %s is %s, not running", ref, vm.State)
	}
	return nil
}

// writeEnv replaces the env file, even with an empty env: a VM restored from a
// snapshot carries its source's file, which must not leak into the new sandbox.
func (a *Adapter) writeEnv(ctx context.Context, ref string, env map[string]string) error {
	return a.writeFile(ctx, ref, EnvFile, []byte(exports(env)))
}
