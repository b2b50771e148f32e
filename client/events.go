package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"net/http"
	"time"

	"github.com/different-ai/differently/api"
)

// ListSandboxEvents returns one page of a sandbox's history, oldest first; pass
// NextCursor back as params.Cursor for the events after it.
func (c *Client) ListSandboxEvents(ctx context.Context, id string, params *ListSandboxEventsParams) (*EventList, error) {
	return decode[EventList](c.API.ClientInterface.ListSandboxEvents(ctx, id, params))
}

// ListEvents returns one page of the events of every sandbox the token may see.
// NextCursor is set on every page, the last included: polling with it returns only
// what was recorded since. params.Follow is ignored (see FollowEvents).
func (c *Client) ListEvents(ctx context.Context, params *ListEventsParams) (*EventList, error) {
	p := ListEventsParams{}
	if params != nil {
		p = *params
	}
	p.Follow = nil
	return decode[EventList](c.API.ClientInterface.ListEvents(ctx, &p))
}

// FollowEvents yields the events params selects as the daemon records them,
// starting after params.Cursor (at the oldest event kept when it is nil), until ctx
// ends or the caller stops ranging. When the stream breaks (the daemon restarts, a
// proxy cuts an idle connection) it reconnects after a pause, from the cursor of the
// last event yielded, so no event is missed or yielded twice. An answer that is an
// error (a bad cursor, a revoked token) ends the sequence with that error, as does
// ctx's end (with ctx's error).
func (c *Client) FollowEvents(ctx context.Context, params *ListEventsParams) iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		p := ListEventsParams{}
		if params != nil {
			p = *params
		}
		follow := true
		p.Follow = &follow
		pause := time.Duration(0)
		for {
			if pause > 0 {
				if err := c.opts.sleep(ctx, pause); err != nil {
					yield(Event{}, err)
					return
				}
			}
			resp, err := c.API.ClientInterface.ListEvents(ctx, &p, func(_ context.Context, r *http.Request) error {
				r.Header.Set("Accept", "application/x-ndjson")
				return nil
			})
			if err != nil {
				if ctx.Err() != nil {
					yield(Event{}, ctx.Err())
					return
				}
				pause = nextPause(pause)
				continue
			}
			if resp.StatusCode/100 != 2 {
				err := newAPIError(resp)
				resp.Body.Close()
				yield(Event{}, err)
				return
			}
			n, stop, err := readEvents(resp, yield, &p)
			resp.Body.Close()
			switch {
			case stop:
				return
			case err != nil:
				yield(Event{}, err)
				return
			case ctx.Err() != nil:
				yield(Event{}, ctx.Err())
				return
			}
			if n > 0 {
				pause = 0
			}
			pause = nextPause(pause)
		}
	}
}

// nextPause doubles the wait between reconnections, from a tenth of a second to five.
func nextPause(d time.Duration) time.Duration {
	return min(max(2*d, 100*time.Millisecond), 5*time.Second)
}

// readEvents yields the lines of one follow stream and moves p.Cursor along. It
// returns how many it yielded, stop when the caller stopped ranging, and an error
// only for a stream that cannot be read on (a malformed event): a stream that just
// ends is reconnected.
func readEvents(resp *http.Response, yield func(Event, error) bool, p *ListEventsParams) (int, bool, error) {
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), api.MaxStreamLineBytes+1)
	n := 0
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var e Event
		if err := json.Unmarshal(line, &e); err != nil {
			return n, false, fmt.Errorf("differently: event stream: bad event: %w", err)
		}
		n++
		if e.Cursor != "" {
			cursor := e.Cursor
			p.Cursor = &cursor
		}
		if !yield(e, nil) {
			return n, true, nil
		}
	}
	if errors.Is(sc.Err(), bufio.ErrTooLong) {
		return n, false, fmt.Errorf("differently: event stream: a line is over %d bytes", api.MaxStreamLineBytes)
	}
	return n, false, nil
}
