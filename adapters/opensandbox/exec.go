package opensandbox

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/adapters/httpx"
	"github.com/different-ai/differently/api"
)

const (
	// timeoutGrace is how long past its timeout a command may run before the
	// adapter stops waiting for execd to kill it.
	timeoutGrace = 10 * time.Second
	// killedExit is reported for a command killed by a signal execd does not name.
	killedExit = 137
)

var errLocalTimeout = errors.New("opensandbox: command outlived its timeout")

// Exec runs a command to completion, keeping at most api.MaxExecOutputBytes of each
// stream and setting Truncated when more came.
func (a *Adapter) Exec(ctx context.Context, ref string, req api.ExecRequest) (api.ExecResult, error) {
	var stdout, stderr adapters.OutputBuffer
	start := time.Now()
	st, err := a.run(ctx, ref, req, func(stream, data string) error {
		if stream == api.StreamStderr {
			_, _ = stderr.Write([]byte(data))
		} else {
			_, _ = stdout.Write([]byte(data))
		}
		return nil
	})
	if err != nil {
		return api.ExecResult{}, err
	}
	return api.ExecResult{
		ExitCode: st.Code, TimedOut: st.TimedOut,
		Stdout: stdout.String(), Stderr: stderr.String(),
		Truncated:  stdout.Truncated() || stderr.Truncated(),
		DurationMs: time.Since(start).Milliseconds(),
	}, nil
}

// ExecStream runs a command and emits its output as execd delivers it.
func (a *Adapter) ExecStream(ctx context.Context, ref string, req api.ExecRequest, emit func(api.ExecEvent) error) (adapters.ExitStatus, error) {
	return a.run(ctx, ref, req, func(stream, data string) error {
		return emit(api.ExecEvent{Stream: stream, Data: data})
	})
}

// run executes req through execd's POST /command and feeds output to out.
func (a *Adapter) run(ctx context.Context, ref string, req api.ExecRequest, out func(stream, data string) error) (adapters.ExitStatus, error) {
	if err := req.Validate(); err != nil {
		return adapters.ExitStatus{}, err
	}
	c, err := a.execdFor(ctx, ref)
	if err != nil {
		return adapters.ExitStatus{}, err
	}
	stdinPath := ""
	if req.Stdin != "" {
		stdinPath = "/tmp/.differently-stdin-" + randomHex()
		if err := a.upload(ctx, c, stdinPath, []byte(req.Stdin), 0o600); err != nil {
			a.forgetOnOutage(ref, err)
			return adapters.ExitStatus{}, err
		}
	}
	body := map[string]any{"command": a.wrap(req, stdinPath)}
	if req.Cwd != "" {
		body["cwd"] = req.Cwd
	}
	if len(req.Env) > 0 {
		body["envs"] = req.Env
	}
	var limit time.Duration
	if req.TimeoutSeconds > 0 {
		limit = time.Duration(req.TimeoutSeconds) * time.Second
		body["timeout"] = limit.Milliseconds()
	}

	runCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	if limit > 0 {
		// execd enforces the timeout; this only stops waiting for one that does not.
		t := time.AfterFunc(limit+timeoutGrace, func() { cancel(errLocalTimeout) })
		defer t.Stop()
	}
	b, _ := json.Marshal(body)
	hreq, err := c.NewRequest(runCtx, http.MethodPost, "/command", nil, bytes.NewReader(b))
	if err != nil {
		return adapters.ExitStatus{}, err
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", "text/event-stream")
	start := time.Now()
	resp, err := c.Send(hreq)
	if err != nil {
		a.forgetOnOutage(ref, err)
		if stdinPath != "" {
			a.cleanup(ctx, c, stdinPath)
		}
		if errors.Is(context.Cause(runCtx), errLocalTimeout) {
			return adapters.ExitStatus{Code: api.TimeoutExitCode, TimedOut: true}, nil
		}
		return adapters.ExitStatus{}, err
	}
	defer resp.Body.Close()

	rb := newRebuilder(a.cfg.LineEndings, out)
	var cmdID string
	var final *adapters.ExitStatus
	var emitErr error
	streamErr := readEvents(resp.Body, func(ev execEvent) (bool, error) {
		switch ev.Type {
		case "init":
			cmdID = ev.Text
		case "stdout", "stderr":
			add := rb.add
			if ev.more {
				add = rb.more
			}
			if err := add(ev.Type, ev.Text); err != nil {
				emitErr = err
				return true, err
			}
		case "execution_complete":
			final = &adapters.ExitStatus{Code: 0}
			return true, nil
		case "error":
			st, err := exitFromError(ev)
			if err != nil {
				return true, c.ScrubError(err)
			}
			final = &st
			return true, nil
		}
		return false, nil
	})
	elapsed := time.Since(start)
	switch {
	case emitErr != nil:
		cancel(emitErr)
		a.interrupt(ctx, c, cmdID)
		return adapters.ExitStatus{}, emitErr
	case final != nil:
		if limit > 0 && final.Code != 0 && elapsed >= limit {
			return adapters.ExitStatus{Code: api.TimeoutExitCode, TimedOut: true}, nil
		}
		return *final, nil
	case errors.Is(context.Cause(runCtx), errLocalTimeout):
		a.interrupt(ctx, c, cmdID)
		return adapters.ExitStatus{Code: api.TimeoutExitCode, TimedOut: true}, nil
	case ctx.Err() != nil:
		a.interrupt(ctx, c, cmdID)
		return adapters.ExitStatus{}, c.TransportError(ctx.Err())
	case streamErr != nil && api.AsError(streamErr) != nil:
		return adapters.ExitStatus{}, streamErr
	}
	a.dropExecd(ref)
	msg := "the stream ended before the command finished"
	if streamErr != nil {
		msg += ": " + c.Scrub(streamErr.Error())
	}
	return adapters.ExitStatus{}, adapters.Unavailable("opensandbox execd: %s", msg)
}

// exitFromError reads a non-zero exit from execd's error event. execd reports the
// exit code as the error value of a CommandExecError; anything else means the
// command never ran.
func exitFromError(ev execEvent) (adapters.ExitStatus, *api.Error) {
	if ev.Error == nil {
		return adapters.ExitStatus{}, adapters.Unavailable("opensandbox execd: error event without details")
	}
	code, err := strconv.Atoi(strings.TrimSpace(ev.Error.EValue))
	if ev.Error.EName != "CommandExecError" || err != nil {
		return adapters.ExitStatus{}, adapters.Unavailable("opensandbox execd: command did not run: %s: %s", ev.Error.EName, ev.Error.EValue)
	}
	if code < 0 {
		code = killedExit // Go's exec reports -1 for a process killed by a signal
	}
	return adapters.ExitStatus{Code: code}, nil
}

// wrap builds the shell line execd runs with bash -c. Args are quoted so no shell
// sees them; a command runs under /bin/sh -c as the contract says. Stdin comes from
// the staged file, opened then unlinked before the command starts, else from
// /dev/null. Unless line ends are raw, a final newline on both streams lets the
// rebuilder tell a last line with a newline from one without.
func (a *Adapter) wrap(req api.ExecRequest, stdinPath string) string {
	var sb strings.Builder
	if stdinPath != "" {
		sb.WriteString("exec <" + shellQuote(stdinPath) + " && rm -f " + shellQuote(stdinPath) + "; ")
	} else {
		sb.WriteString("exec </dev/null; ")
	}
	if len(req.Args) > 0 {
		for i, arg := range req.Args {
			if i > 0 {
				sb.WriteByte(' ')
			}
			sb.WriteString(shellQuote(arg))
		}
	} else {
		sb.WriteString("/bin/sh -c " + shellQuote(req.Command))
	}
	if a.cfg.LineEndings == "raw" {
		return sb.String()
	}
	sb.WriteString("; rc=$?; printf '\\n'; printf '\\n' >&2; exit $rc")
	return sb.String()
}

// shellQuote makes s one literal shell word.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func randomHex() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// interrupt asks execd to stop a command the adapter no longer waits for. It is best
// effort: closing the stream already ends it on execd versions that watch for that.
func (a *Adapter) interrupt(ctx context.Context, c *httpx.Client, id string) {
	if id == "" {
		return
	}
	ictx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_ = c.JSON(ictx, http.MethodDelete, "/command", url.Values{"id": {id}}, nil, nil)
}

// rebuilder turns execd's line events back into output. execd sends each line
// without its terminator (an empty line as "\n"); the terminator is added back
// before the next line of the same stream, and the last one (the wrapper's own
// newline) is dropped.
type rebuilder struct {
	nl      string
	raw     bool
	pending map[string]bool
	out     func(stream, data string) error
}

func newRebuilder(mode string, out func(stream, data string) error) *rebuilder {
	nl := "\n"
	if mode == "crlf" {
		nl = "\r\n"
	}
	return &rebuilder{nl: nl, raw: mode == "raw", pending: map[string]bool{}, out: out}
}

func (r *rebuilder) add(stream, text string) error {
	if r.raw {
		if text == "" {
			return nil
		}
		return r.out(stream, text)
	}
	line := text
	if text == "\n" {
		line = ""
	}
	data := line
	if r.pending[stream] {
		data = r.nl + line
	}
	r.pending[stream] = true
	if data == "" {
		return nil
	}
	return r.out(stream, data)
}

// more passes on a further piece of the line that add began: a long line of output
// comes in several.
func (r *rebuilder) more(stream, text string) error {
	if text == "" {
		return nil
	}
	return r.out(stream, text)
}
