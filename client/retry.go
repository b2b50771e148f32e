package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"syscall"
	"time"

	"github.com/different-ai/differently/api"
)

// retryTransport re-sends idempotent requests that met 429, 503 or a connection
// failure. It lives at the RoundTripper level so that every call goes through it,
// wrapped or reached through Client.API, and so that a retry re-sends the exact
// request: the body comes back from Request.GetBody, which http.NewRequest sets for
// the in-memory bodies the generated client builds.
type retryTransport struct {
	base http.RoundTripper // nil means http.DefaultTransport
	opts *options
}

func (t *retryTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	base := t.base
	if base == nil {
		base = http.DefaultTransport
	}
	if t.opts.maxAttempts <= 1 || !retryable(req) {
		return base.RoundTrip(req)
	}
	ctx := req.Context()
	// mayHaveRun says that an earlier attempt may have been carried out: its
	// connection failed after the request could have reached the daemon.
	mayHaveRun := false
	for attempt := 1; ; attempt++ {
		r := req
		if attempt > 1 {
			var err error
			if r, err = rewind(req, mayHaveRun); err != nil {
				return nil, err
			}
		}
		resp, err := base.RoundTrip(r)
		if resp != nil && resp.Request == nil {
			// http.Transport sets it; the delete wrappers read the replay mark from it.
			resp.Request = r
		}
		if attempt >= t.opts.maxAttempts {
			return resp, err
		}

		var retryAfter time.Duration
		switch {
		case err != nil:
			if !isConnError(ctx, err) {
				return nil, err
			}
			// A refused dial sent nothing; any other broken connection may have
			// carried the request, and only its answer was lost.
			mayHaveRun = mayHaveRun || !isDialError(err)
		case resp.StatusCode == http.StatusTooManyRequests && quotaExceeded(resp):
			// A full quota stays full until the tenant frees something: asking again
			// soon only delays the answer.
			return resp, nil
		case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable:
			retryAfter = parseRetryAfter(resp.Header.Get("Retry-After"), t.opts.now())
			if retryAfter > max(t.opts.maxDelay, maxRetryAfter) {
				// A wait this long (a proxy's Retry-After: 86400, say) is an outage, not
				// a pause between attempts: the caller hears of it now, the APIError's
				// RetryAfter saying how long, instead of a call held for a day.
				return resp, nil
			}
		default:
			return resp, nil
		}

		// The server's Retry-After is a floor (coming back sooner is pointless), our own
		// backoff another; maxDelay caps only the latter, and a Retry-After over
		// maxRetryAfter was answered above. The caller's context is the real bound: a
		// wait that would outlive its deadline is not started, and the caller gets the
		// last answer, which says more than "deadline exceeded".
		wait := max(retryAfter, t.backoff(attempt))
		if deadline, ok := ctx.Deadline(); ok && t.opts.now().Add(wait).After(deadline) {
			return resp, err
		}
		if resp != nil {
			// Drain a little so the connection can be reused, then let it go.
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
			resp.Body.Close()
		}
		if serr := t.opts.sleep(ctx, wait); serr != nil {
			return nil, serr
		}
	}
}

// maxRetryAfter is the longest Retry-After waited out between attempts, unless the
// backoff's maxDelay is longer: a daemon asks for seconds; more is a proxy's notice
// of an outage, which the caller should hear about rather than wait on unaware.
const maxRetryAfter = time.Minute

// backoff is the wait after the given failed attempt (1-based): baseDelay·2^(n-1)
// capped at maxDelay, with "equal jitter" (half fixed, half random) so that clients
// failing together do not come back together, yet never retry at once.
func (t *retryTransport) backoff(attempt int) time.Duration { return t.opts.backoff(attempt) }

func (o *options) backoff(attempt int) time.Duration {
	d := o.baseDelay
	for i := 1; i < attempt && d < o.maxDelay; i++ {
		d *= 2
	}
	d = min(d, o.maxDelay)
	half := d / 2
	return half + time.Duration(o.jitter()*float64(d-half))
}

// retryable reports whether sending req twice is harmless: the idempotent methods,
// and a POST carrying an Idempotency-Key (a create the server deduplicates). Exec
// and the lifecycle POSTs are never retried: running a command twice is not safe.
// A body that cannot be rewound also rules a retry out.
func retryable(req *http.Request) bool {
	if req.Body != nil && req.Body != http.NoBody && req.GetBody == nil {
		return false
	}
	switch req.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodPut, http.MethodDelete:
		return true
	case http.MethodPost:
		return req.Header.Get("Idempotency-Key") != ""
	}
	return false
}

// replayedKey is the context key marking an attempt sent again after one that may
// have been carried out (see replayed).
type replayedKey struct{}

// replayed reports whether req is an attempt sent again after one that may have been
// carried out, whose answer was lost with its connection. A DELETE the daemon does
// not repeat answers such a replay 404 when the first attempt did delete.
func replayed(req *http.Request) bool {
	v, _ := req.Context().Value(replayedKey{}).(bool)
	return v
}

// rewind clones req with a fresh copy of its body for another attempt, marked as a
// replay when an earlier attempt may have been carried out.
func rewind(req *http.Request, mayHaveRun bool) (*http.Request, error) {
	ctx := req.Context()
	if mayHaveRun {
		ctx = context.WithValue(ctx, replayedKey{}, true)
	}
	r := req.Clone(ctx)
	if req.Body != nil && req.Body != http.NoBody {
		body, err := req.GetBody()
		if err != nil {
			return nil, err
		}
		r.Body = body
	}
	return r, nil
}

// isConnError reports whether err means the request never got an answer because of
// the connection (refused, reset, closed early), as opposed to the caller giving up.
func isConnError(ctx context.Context, err error) bool {
	if ctx.Err() != nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	if errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return true
	}
	return isDialError(err)
}

// isDialError reports whether err is a failure to connect: the request was not sent.
func isDialError(err error) bool {
	op, ok := errors.AsType[*net.OpError](err)
	return ok && op.Op == "dial"
}

// parseRetryAfter reads Retry-After as delay-seconds or an HTTP date; anything else,
// or a date in the past, is no constraint.
func parseRetryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	if secs, err := strconv.Atoi(v); err == nil {
		if secs < 0 {
			return 0
		}
		return time.Duration(secs) * time.Second
	}
	if when, err := http.ParseTime(v); err == nil && when.After(now) {
		return when.Sub(now)
	}
	return 0
}

// quotaExceeded reports whether a 429 is the API's quota_exceeded error rather than
// a rate limit. It reads the start of the body and puts it back for the caller.
func quotaExceeded(resp *http.Response) bool {
	head, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	resp.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(head), resp.Body), resp.Body}
	if err != nil {
		return false
	}
	var env struct {
		Error struct {
			Code api.Code `json:"code"`
		} `json:"error"`
	}
	return json.Unmarshal(head, &env) == nil && env.Error.Code == api.CodeQuotaExceeded
}
