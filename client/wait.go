package client

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"time"
)

// ErrTerminalState is wrapped by WaitForState's error when the sandbox reached
// failed or terminated without that being one of the states waited for.
var ErrTerminalState = errors.New("sandbox reached a terminal state")

// maxWaitSeconds is the longest wait asked of the daemon in one request (the API's
// maximum is 60 s): short enough for proxies that cut idle requests, long enough that
// a slow provisioning costs a request per half-minute.
const maxWaitSeconds = 30

// WaitForState waits until the sandbox's state is one of states and returns it. It
// asks the daemon's wait route, which answers as soon as the state changes (the
// daemon hears of it from its store, whichever replica made the change), so the wait
// ends within milliseconds of the change and costs one request per change or per
// half-minute. If the sandbox reaches failed or terminated instead, it returns the
// sandbox and an error (wrapping ErrTerminalState) naming the state and the daemon's
// reason. When ctx ends first, it returns the last sandbox seen, if any, with the
// context's error. A daemon out of reach (a restart, a failover: refused
// connections, 502, 503, 504) does not end the wait: it is asked again, with the
// client's backoff, until ctx ends; so is a request whose answer did not come in
// time (the transport's ResponseHeaderTimeout, the http.Client's Timeout). Any other
// API error (a 404, say) ends the wait at once.
func (c *Client) WaitForState(ctx context.Context, id string, states ...SandboxState) (*Sandbox, error) {
	if len(states) == 0 {
		return nil, errors.New("differently: WaitForState needs at least one state")
	}
	var last *Sandbox
	failures := 0
	for {
		secs := c.waitSeconds(ctx)
		sb, err := decode[Sandbox](c.API.ClientInterface.WaitSandbox(ctx, id, &WaitSandboxParams{State: states, TimeoutSeconds: &secs}))
		if err != nil && ctx.Err() == nil && daemonAway(ctx, err) {
			failures++
			if serr := c.opts.sleep(ctx, max(c.opts.backoff(failures), minWaitPause)); serr == nil {
				continue
			}
		}
		if err != nil {
			if cerr := ctx.Err(); cerr != nil {
				if last != nil {
					return last, waitTimeout(id, states, last, cerr)
				}
				if !errors.Is(err, cerr) {
					// The context ended in the pause after a failed request: its end is
					// the answer, and the failure says why nothing came before it.
					err = fmt.Errorf("differently: waiting for sandbox %s to be %s: %w (the last request: %w)", id, statesText(states), cerr, err)
				}
			}
			return last, err
		}
		failures = 0
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
		if err := ctx.Err(); err != nil {
			return sb, waitTimeout(id, states, sb, err)
		}
	}
}

// minWaitPause is the least a wait pauses before asking a daemon that is away again,
// whatever the retry settings: WithRetry(1, 0, 0), which turns retries off, would
// otherwise have the wait ask in a tight loop.
const minWaitPause = 100 * time.Millisecond

// daemonAway reports whether a failed request says only that the daemon could not
// answer for now, nothing about the sandbox.
func daemonAway(ctx context.Context, err error) bool {
	if _, ok := errors.AsType[*net.DNSError](err); ok {
		// A name that does not resolve is a wrong endpoint more often than a
		// passing outage; waiting on it for ever would hide the mistake.
		return false
	}
	if timedOut(ctx, err) {
		return true
	}
	if ae, ok := errors.AsType[*APIError](err); ok {
		switch ae.Status {
		case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
			return true
		}
		return false
	}
	return isConnError(ctx, err)
}

// timedOut reports whether a request failed because its answer did not come in time
// (the transport's ResponseHeaderTimeout, the http.Client's Timeout) while the caller
// still waits. On a request the daemon holds for a wait, that says the wait outlasted
// the client's patience, nothing about the sandbox: it is asked again.
func timedOut(ctx context.Context, err error) bool {
	ne, ok := errors.AsType[net.Error](err)
	return ok && ne.Timeout() && ctx.Err() == nil
}

// waitSeconds is how long one wait request may last: maxWaitSeconds, less when the
// context, the HTTP client's own timeout or its transport's ResponseHeaderTimeout
// ends sooner, and at least a second so that the daemon never answers at once with
// nothing new.
func (c *Client) waitSeconds(ctx context.Context) int {
	limit := maxWaitSeconds * time.Second
	if dl, ok := ctx.Deadline(); ok {
		limit = min(limit, time.Until(dl))
	}
	if hc := c.opts.httpClient; hc != nil {
		if hc.Timeout > 0 {
			limit = min(limit, hc.Timeout/2)
		}
		// The daemon sends no headers until the wait ends, so a transport giving up
		// on headers sooner would cut every wait short. The margin leaves room for
		// the round trip and for a daemon answering a little after the wait.
		if tr, ok := hc.Transport.(*http.Transport); ok && tr.ResponseHeaderTimeout > 0 {
			rht := tr.ResponseHeaderTimeout
			limit = min(limit, rht-max(rht/10, time.Second))
		}
	}
	return max(1, int(limit/time.Second))
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

// preferWait is the Prefer header asking the daemon to hold its answer as long as
// one wait request of WaitForState would last.
func (c *Client) preferWait(ctx context.Context) *Prefer {
	p := Prefer(fmt.Sprintf("wait=%d", c.waitSeconds(ctx)))
	return &p
}

// settle returns sb when it is in one of states, and otherwise waits for them as
// WaitForState does (an error for a terminal state not among them).
func (c *Client) settle(ctx context.Context, sb *Sandbox, states ...SandboxState) (*Sandbox, error) {
	if slices.Contains(states, sb.State) {
		return sb, nil
	}
	return c.WaitForState(ctx, sb.Id, states...)
}
