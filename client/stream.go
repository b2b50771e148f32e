package client

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"iter"
	"net/http"

	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/internal/ndjson"
)

// ErrStreamIncomplete is wrapped by the error ExecStream yields when the stream ends
// before its final event: the connection dropped or the daemon went away, and the
// command's outcome is unknown.
var ErrStreamIncomplete = errors.New("exec stream ended without a final event")

// ExecStream runs a command and yields its events as they arrive: output events
// (Stream and Data) and then the final event carrying ExitCode. Errors come as the
// second value and end the sequence: an API refusal (*APIError, before any event), a
// final event carrying Error (yielded with that event), a line over
// api.MaxStreamLineBytes or not JSON, or a stream ending without a final event
// (ErrStreamIncomplete). Breaking out of the loop early closes the connection.
//
// Each range over the sequence sends the request again, running the command again;
// it is never retried on its own.
func (c *Client) ExecStream(ctx context.Context, id string, req api.ExecRequest) iter.Seq2[api.ExecEvent, error] {
	return func(yield func(api.ExecEvent, error) bool) {
		stream := N1
		resp, err := c.API.ClientInterface.ExecSandbox(ctx, id, &ExecSandboxParams{Stream: &stream}, req,
			func(_ context.Context, r *http.Request) error {
				r.Header.Set("Accept", "application/x-ndjson")
				return nil
			})
		if err != nil {
			yield(api.ExecEvent{}, transportError(err))
			return
		}
		defer resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			yield(api.ExecEvent{}, newAPIError(resp))
			return
		}

		sc := bufio.NewScanner(resp.Body)
		// The limit is the contract's: the daemon never sends a longer line, so one
		// means a broken or hostile peer, not a reason to buffer without bound.
		sc.Buffer(make([]byte, 0, 64<<10), api.MaxStreamLineBytes+1)
		var dec ndjson.Decoder
		for sc.Scan() {
			line := bytes.TrimSpace(sc.Bytes())
			if len(line) == 0 {
				continue
			}
			ev, err := dec.Decode(line)
			if err != nil {
				yield(api.ExecEvent{}, fmt.Errorf("differently: exec stream: bad event: %w", err))
				return
			}
			if ev.Error != "" {
				yield(ev, fmt.Errorf("differently: exec stream failed: %s", ev.Error))
				return
			}
			if !yield(ev, nil) || ev.IsFinal() {
				return
			}
		}
		switch err := sc.Err(); {
		case errors.Is(err, bufio.ErrTooLong):
			yield(api.ExecEvent{}, fmt.Errorf("differently: exec stream: a line is over %d bytes", api.MaxStreamLineBytes))
		case err != nil:
			yield(api.ExecEvent{}, transportError(err))
		default:
			yield(api.ExecEvent{}, fmt.Errorf("differently: %w", ErrStreamIncomplete))
		}
	}
}
