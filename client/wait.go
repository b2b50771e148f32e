package client

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
)

// ErrTerminalState is wrapped by WaitForState's error when the sandbox reached
// failed or terminated without that being one of the states waited for.
var ErrTerminalState = errors.New("sandbox reached a terminal state")

// Polling starts fast because a devhost sandbox is running within a scheduler pass or
// two, and slows down so a long provisioning does not hammer the daemon.
const (
	waitFirstDelay = 100 * time.Millisecond
	waitMaxDelay   = 2 * time.Second
)

// WaitForState polls the sandbox until its state is one of states and returns it. If
// it reaches failed or terminated instead, it returns the sandbox and an error
// (wrapping ErrTerminalState) naming the state and the daemon's reason. When ctx ends
// first, it returns the last sandbox seen, if any, with the context's error; an API
// error (a 404, say) ends the wait at once.
func (c *Client) WaitForState(ctx context.Context, id string, states ...SandboxState) (*Sandbox, error) {
	if len(states) == 0 {
		return nil, errors.New("differently: WaitForState needs at least one state")
	}
	delay := waitFirstDelay
	var last *Sandbox
	for {
		sb, err := c.GetSandbox(ctx, id)
		if err != nil {
			if ctx.Err() != nil && last != nil {
				return last, waitTimeout(id, states, last, ctx.Err())
			}
			return last, err
		}
		last = sb
		if slices.Contains(states, sb.State) {
			return sb, nil
		}
		if sb.State == Failed || sb.State == Terminated {
			reason := ""
			if sb.Reason != nil && *sb.Reason != "" {
				reason = ": " + *sb.Reason
			}
			return sb, fmt.Errorf("differently: sandbox %s is %s, not %s%s: %w", id, sb.State, statesText(states), reason, ErrTerminalState)
		}
		if err := c.opts.sleep(ctx, delay); err != nil {
			return sb, waitTimeout(id, states, sb, err)
		}
		delay = min(delay*3/2, waitMaxDelay)
	}
}

func waitTimeout(id string, states []SandboxState, sb *Sandbox, err error) error {
	return fmt.Errorf("differently: waiting for sandbox %s to be %s (it is %s): %w", id, statesText(states), sb.State, err)
}

func statesText(states []SandboxState) string {
	s := string(states[0])
	for _, st := range states[1:] {
		s += " or " + string(st)
	}
	return s
}
