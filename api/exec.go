package api

import (
	"strings"
)

// ExecRequest runs one command in a sandbox. Exactly one of Command (run by
// /bin/sh -c) and Args (run directly, no shell) is set.
type ExecRequest struct {
	Command string            `json:"command,omitempty"`
	Args    []string          `json:"args,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	// Cwd is the working directory inside the sandbox; empty means the adapter's default.
	Cwd string `json:"cwd,omitempty"`
	// Stdin is written to the command's standard input, which is then closed.
	Stdin string `json:"stdin,omitempty"`
	// TimeoutSeconds bounds the command; 0 means the adapter's default. When it
	// elapses the command is killed and the result has TimedOut set and exit code 124.
	TimeoutSeconds int `json:"timeoutSeconds,omitempty"`
}

// TimeoutExitCode is the exit code reported for a command killed by its timeout, as
// coreutils' timeout(1) does.
const TimeoutExitCode = 124

// Validate checks the request's shape. It does not know any adapter's defaults.
func (r ExecRequest) Validate() error {
	switch {
	case r.Command == "" && len(r.Args) == 0:
		return Errorf(CodeInvalidRequest, "exec needs command or args")
	case r.Command != "" && len(r.Args) > 0:
		return Errorf(CodeInvalidRequest, "exec takes command or args, not both")
	case len(r.Args) > 0 && r.Args[0] == "":
		return Errorf(CodeInvalidRequest, "exec args[0] (the program) is empty")
	case r.TimeoutSeconds < 0:
		return Errorf(CodeInvalidRequest, "timeoutSeconds must not be negative")
	case r.TimeoutSeconds > MaxExecTimeoutSeconds:
		return Errorf(CodeInvalidRequest, "timeoutSeconds %d is over the maximum of %d", r.TimeoutSeconds, MaxExecTimeoutSeconds)
	}
	if strings.ContainsRune(r.Command, 0) || strings.ContainsRune(r.Cwd, 0) {
		return Errorf(CodeInvalidRequest, "command and cwd must not contain NUL bytes")
	}
	for _, a := range r.Args {
		if strings.ContainsRune(a, 0) {
			return Errorf(CodeInvalidRequest, "args must not contain NUL bytes")
		}
	}
	for k, v := range r.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return Errorf(CodeInvalidRequest, "env name %q is not valid", k)
		}
		if strings.ContainsRune(v, 0) {
			return Errorf(CodeInvalidRequest, "env value of %q contains a NUL byte", k)
		}
	}
	return nil
}

// ExecResult is the outcome of a command that ran. A non-zero exit is a result, not
// an error.
type ExecResult struct {
	ExitCode   int    `json:"exitCode"`
	Stdout     string `json:"stdout"`
	Stderr     string `json:"stderr"`
	DurationMs int64  `json:"durationMs"`
	// Truncated is set when stdout or stderr went over MaxExecOutputBytes and was cut.
	Truncated bool `json:"truncated"`
	// TimedOut is set when the command was killed by its timeout.
	TimedOut bool `json:"timedOut,omitempty"`
}

// Stream names used in ExecEvent.Stream.
const (
	StreamStdout = "stdout"
	StreamStderr = "stderr"
)

// ExecEvent is one event of a streamed exec. Output events carry Stream and Data; the
// last event of a stream carries either ExitCode or Error and nothing else.
type ExecEvent struct {
	Stream string `json:"stream,omitempty"`
	Data   string `json:"data,omitempty"`
	// ExitCode is set on the final event of a command that ran to the end.
	ExitCode *int `json:"exitCode,omitempty"`
	// TimedOut accompanies ExitCode when the command was killed by its timeout.
	TimedOut bool `json:"timedOut,omitempty"`
	// Error is set on the final event of a stream that failed after it started.
	Error string `json:"error,omitempty"`
	// Code accompanies Error on the public API: the code an error envelope would have
	// carried, had the failure come before the status line (provider_unavailable for
	// a backend whose stream broke off). The adapter protocol leaves it out; its
	// clients read any failure after the stream started as provider_unavailable.
	Code Code `json:"code,omitempty"`
}

// IsFinal reports whether the event ends a stream.
func (e ExecEvent) IsFinal() bool { return e.ExitCode != nil || e.Error != "" }

// ExitEvent builds the final event of a command that exited.
func ExitEvent(code int, timedOut bool) ExecEvent {
	return ExecEvent{ExitCode: &code, TimedOut: timedOut}
}
