package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/client"
	"github.com/different-ai/differently/server/defaults"
)

// Exit codes (docs/cli.md#exit-codes). exec and run pass the remote command's own
// code through instead, and fail with execFailed when the CLI itself fails.
const (
	exitOK          = 0
	exitError       = 1 // any other failure: a refusal such as invalid_state, a 5xx
	exitUsage       = 2 // a mistake in the command line or the config file
	exitAuth        = 3 // 401 or 403: no token, a wrong one, or one without the right
	exitNotFound    = 4 // 404: no such sandbox, pool, snapshot, ...
	exitUnreachable = 5 // no daemon answered, or it answered 503 provider_unavailable
	exitTimeout     = 6 // a --timeout or --wait-timeout ran out
	// execFailed is exec's and run's own failure, apart from the codes the remote
	// command can give (as docker run does).
	execFailed = 125
	// exitInterrupted is Ctrl-C or SIGTERM, as a shell reports a SIGINT.
	exitInterrupted = 130
)

// passThrough marks the commands whose exit code is the remote command's.
const passThrough = "passThroughExitCode"

// fail prints err as one line on stderr, with its code and a hint, and returns the
// exit code.
func (a *app) fail(cmd *cobra.Command, err error) int {
	var ee exitCode
	if errors.As(err, &ee) {
		return ee.code
	}
	code, msg, hint := a.classify(err)
	if cmd != nil && cmd.Annotations[passThrough] == "true" && code != exitInterrupted && code != exitUsage {
		code = execFailed
	}
	prefix := "error:"
	if a.colour(a.io.err) {
		prefix = paint(red, prefix)
	}
	line := prefix + " " + msg
	if hint != "" {
		line += " (hint: " + hint + ")"
	}
	fmt.Fprintln(a.io.err, line)
	return code
}

// classify turns err into an exit code, a one-line message naming the error code,
// and a hint of what to do.
func (a *app) classify(err error) (code int, msg, hint string) {
	msg = oneLine(trimPrefix(err.Error()))
	msg = strings.ReplaceAll(msg, ": differently: ", ": ")
	var ue usageError
	// cobra's own word for a command it does not know.
	if errors.As(err, &ue) || strings.HasPrefix(msg, "unknown command ") {
		return exitUsage, msg, "see --help"
	}
	if errors.Is(err, errInterrupted) || errors.Is(err, context.Canceled) && a.ctx.Err() != nil {
		return exitInterrupted, "interrupted", ""
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return exitTimeout, msg, "a longer --wait-timeout gives it more time"
	}
	endpoint := defaultEndpointText
	if a.conn != nil {
		endpoint = a.conn.endpoint
	}
	var ae *client.APIError
	if errors.As(err, &ae) {
		switch {
		case ae.Status == http.StatusUnauthorized:
			return exitAuth, msg, a.tokenHint()
		case ae.Status == http.StatusForbidden:
			return exitAuth, msg, "this needs an admin token, or a project token of the sandbox's project"
		case ae.Status == http.StatusNotFound:
			return exitNotFound, msg, "`differently ls` and `differently pools ls` list what there is"
		case ae.Code == api.CodeProviderUnavailable || ae.Status == http.StatusServiceUnavailable:
			return exitUnreachable, msg, "the daemon or the pool's backend is unavailable for now; try again"
		case ae.Code == api.CodeUnsupportedOperation:
			return exitError, msg, "the sandbox's pool cannot do this; `differently pools get POOL` lists its features"
		case ae.Code == api.CodeInvalidState:
			return exitError, msg, "`differently get ID` shows the sandbox's state"
		case ae.Code == api.CodeInvalidRequest && strings.Contains(ae.Message, "pool"):
			return exitError, msg, "`differently pools ls` lists the pools"
		case ae.Code == api.CodeUnsupportedCapability:
			return exitError, msg, "no pool could take it: check --pool and --template against `differently pools ls`"
		}
		return exitError, msg, ""
	}
	var se *client.StreamError
	if errors.As(err, &se) {
		return exitUnreachable, msg, "the command's outcome is unknown; run it again"
	}
	if errors.Is(err, client.ErrStreamIncomplete) {
		return exitUnreachable, msg, "the connection broke; the command's outcome is unknown"
	}
	if errors.Is(err, syscall.ECONNREFUSED) || isDial(err) {
		return exitUnreachable, fmt.Sprintf("cannot reach the daemon at %s: %s", endpoint, rootCause(err)),
			"start a development daemon with `go run ./cmd/differently-server --dev`, or point --endpoint or DIFFERENTLY_ENDPOINT at yours"
	}
	return exitError, msg, ""
}

const defaultEndpointText = "its address"

func (a *app) tokenHint() string {
	if a.conn == nil || a.conn.tokenFrom == "" {
		file := "admin-token in its data folder"
		if dir, err := defaults.DataDir(a.getenv); err == nil {
			file = filepath.Join(dir, defaults.AdminTokenFile)
		}
		return "no token was found: set DIFFERENTLY_TOKEN, pass --token-file, or save one with `differently context set`; " +
			"differently-server --dev writes an admin token to " + file
	}
	return "the token from " + a.conn.tokenFrom + " was refused: it is wrong or revoked; an admin can make one with `differently tokens create`"
}

func isDial(err error) bool {
	var oe *net.OpError
	return errors.As(err, &oe) && oe.Op == "dial"
}

// rootCause is the innermost error's text: "connection refused" rather than the
// whole chain of the URL and the dial.
func rootCause(err error) string {
	for {
		next := errors.Unwrap(err)
		if next == nil {
			return err.Error()
		}
		err = next
	}
}

// oneLine joins the lines of an error (errors.Join's, cobra's suggestions) with
// semicolons.
func oneLine(s string) string {
	var parts []string
	for l := range strings.SplitSeq(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			parts = append(parts, l)
		}
	}
	return strings.ReplaceAll(strings.Join(parts, "; "), "Did you mean this?;", "did you mean:")
}
