package provider

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/client"
)

// maxOutputInDiagnostic bounds each stream of a failed init command shown in a
// diagnostic: the end of the output is where the error usually is.
const maxOutputInDiagnostic = 4096

// transition moves a sandbox to the desired state (running, stopped or paused) with
// the lifecycle calls, one step at a time: a stopped sandbox is started before it
// can be paused, a paused one resumed before it can be stopped. A sandbox still
// queued or provisioning is first waited for.
func transition(ctx context.Context, c *client.Client, sb *client.Sandbox, want string) (*client.Sandbox, error) {
	for range 4 {
		var err error
		switch cur := string(sb.State); {
		case cur == want:
			return sb, nil
		case sb.State == client.Queued || sb.State == client.Provisioning:
			sb, err = c.WaitForState(ctx, sb.Id, client.Running, client.Stopped, client.Paused)
		case sb.State == client.Running && want == wantStopped:
			sb, err = c.StopSandbox(ctx, sb.Id)
		case sb.State == client.Running && want == wantPaused:
			sb, err = c.PauseSandbox(ctx, sb.Id)
		case sb.State == client.Stopped:
			sb, err = c.StartSandbox(ctx, sb.Id)
		case sb.State == client.Paused:
			sb, err = c.ResumeSandbox(ctx, sb.Id)
		default:
			return sb, fmt.Errorf("the sandbox is %s%s", sb.State, reasonSuffix(sb))
		}
		if err != nil {
			return sb, err
		}
	}
	return sb, fmt.Errorf("the sandbox is %s, not %s, after the lifecycle calls", sb.State, want)
}

func reasonSuffix(sb *client.Sandbox) string {
	if r := deref(sb.Reason); r != "" {
		return ": " + r
	}
	return ""
}

// stillStarting reports whether a wait for running ended at its deadline with the
// sandbox still on its way there.
func stillStarting(err error, sb *client.Sandbox) bool {
	return errors.Is(err, context.DeadlineExceeded) && sb != nil &&
		(sb.State == client.Queued || sb.State == client.Provisioning)
}

// waitError explains a failed wait; a deadline names the timeout to raise and what
// became of the sandbox in the state.
func waitError(err error, timeout time.Duration, which string) string {
	if !errors.Is(err, context.DeadlineExceeded) {
		return apiError(err)
	}
	var kept string
	switch which {
	case "create":
		kept = "the sandbox's ID is kept in the state (tainted, since what the configuration asks of it after the start " +
			"did not happen), so the next apply replaces it rather than orphaning it."
	case "update":
		kept = "the sandbox stays in the state as it was, and the next plan shows the change again."
	default:
		kept = "the daemon goes on terminating the sandbox, and the next refresh removes it from the state."
	}
	return fmt.Sprintf("%s\n\nThe %s timeout (%s) passed. Raise timeouts.%s if the pool is slow; %s", err, which, timeout, which, kept)
}

// execTimeout is the timeoutSeconds of an init command: what is left of ctx's
// deadline, whole seconds, within what the API accepts.
func execTimeout(ctx context.Context) int {
	deadline, ok := ctx.Deadline()
	if !ok {
		return api.MaxExecTimeoutSeconds
	}
	return min(max(int(time.Until(deadline)/time.Second), 1), api.MaxExecTimeoutSeconds)
}

// execFailure describes a failed init command with its exit code and the end of its
// output.
func execFailure(cmd string, res *api.ExecResult) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Command: %s\nExit code: %d\n", cmd, res.ExitCode)
	if res.TimedOut {
		b.WriteString("The command timed out.\n")
	}
	if res.Truncated {
		b.WriteString("The output was truncated by the daemon.\n")
	}
	fmt.Fprintf(&b, "\nstdout:\n%s\n\nstderr:\n%s", tail(res.Stdout), tail(res.Stderr))
	return b.String()
}

func tail(s string) string {
	if len(s) <= maxOutputInDiagnostic {
		return s
	}
	return "[...]" + s[len(s)-maxOutputInDiagnostic:]
}
