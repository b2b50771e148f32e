package client

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"mime"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/internal/frames"
	"github.com/different-ai/differently/internal/ndjson"
)

// ErrStreamIncomplete is wrapped by the error ExecSandboxStream yields when the stream ends
// before its final event: the connection dropped or the daemon went away, and the
// command's outcome is unknown. The read's own error (a reset, an unexpected EOF),
// when there was one, is wrapped too.
var ErrStreamIncomplete = errors.New("exec stream ended without a final event")

// streamAccept asks for frames, which carry output as raw bytes, and takes NDJSON
// from a daemon that has no frames.
var streamAccept = frames.ContentType + ", " + ndjson.ContentType + ";q=0.5"

// ExecSandboxStream runs a command and yields its events as they arrive: output events
// (Stream and Data) and then the final event carrying ExitCode. Errors come as the
// second value and end the sequence: an API refusal (*APIError, before any event), a
// final event carrying Error and Code (a *StreamError, yielded with that event; the
// code is the one an *APIError would have had before output, which IsCode reads
// from either), a malformed stream (a line
// or frame over api.MaxStreamLineBytes, an event that is not JSON), or a stream
// ending without a final event (ErrStreamIncomplete). Breaking out of the loop early
// closes the connection.
//
// Data is text whichever format the daemon answers in (frames, or NDJSON from an
// older daemon): each byte of output that is not valid UTF-8 comes as U+FFFD.
//
// Each range over the sequence sends the request again, running the command again;
// it is never retried on its own.
func (c *Client) ExecSandboxStream(ctx context.Context, id string, req api.ExecRequest) iter.Seq2[api.ExecEvent, error] {
	return func(yield func(api.ExecEvent, error) bool) {
		stream := N1
		resp, err := c.API.ClientInterface.ExecSandbox(ctx, id, &ExecSandboxParams{Stream: &stream}, req,
			func(_ context.Context, r *http.Request) error {
				r.Header.Set("Accept", streamAccept)
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
		if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt == frames.ContentType {
			readFrames(ctx, resp.Body, yield)
		} else {
			readLines(ctx, resp.Body, yield)
		}
	}
}

// readLines yields the events of an NDJSON stream.
func readLines(ctx context.Context, body io.Reader, yield func(api.ExecEvent, error) bool) {
	sc := bufio.NewScanner(body)
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
		if !yieldEvent(ev, yield) {
			return
		}
	}
	switch err := sc.Err(); {
	case errors.Is(err, bufio.ErrTooLong):
		yield(api.ExecEvent{}, fmt.Errorf("differently: exec stream: a line is over %d bytes", api.MaxStreamLineBytes))
	default:
		yield(api.ExecEvent{}, cut(ctx, err, false))
	}
}

// readFrames yields the events of a framed stream (package frames).
func readFrames(ctx context.Context, body io.Reader, yield func(api.ExecEvent, error) bool) {
	// A read error says nothing of where the stream broke: a connection closed
	// between two frames and one closed inside a frame both give an unexpected EOF
	// from the chunked body. The bytes the body gave, against those of the whole
	// frames read, tell them apart.
	counted := &countingReader{r: body}
	fr := frames.NewReader(counted)
	var whole int64
	var dec ndjson.Decoder
	for {
		kind, p, err := fr.Next()
		switch {
		case errors.Is(err, frames.ErrTooLarge), errors.Is(err, frames.ErrUnknownKind):
			yield(api.ExecEvent{}, fmt.Errorf("differently: exec stream: %w", err))
			return
		case err != nil:
			// The frame reader has taken every byte the body gave before its error.
			yield(api.ExecEvent{}, cut(ctx, err, counted.n > whole))
			return
		}
		whole += frames.HeaderSize + int64(len(p))
		var ev api.ExecEvent
		if kind == frames.Final {
			if ev, err = dec.Decode(p); err == nil && !ev.IsFinal() {
				err = errors.New("it has neither exitCode nor error")
			}
			if err != nil {
				yield(api.ExecEvent{}, fmt.Errorf("differently: exec stream: bad final frame: %w", err))
				return
			}
		} else {
			ev = api.ExecEvent{Stream: kind.String(), Data: text(p)}
		}
		if !yieldEvent(ev, yield) {
			return
		}
	}
}

// cut is the error of a stream whose body ended, or failed to read, before its final
// event: ErrStreamIncomplete, with the read's error unless it was the orderly end.
// The caller's own cancellation is no cut: it gives the context's error.
func cut(ctx context.Context, err error, inFrame bool) error {
	if cerr := ctx.Err(); cerr != nil {
		switch {
		case errors.Is(err, cerr):
			return transportError(err)
		case err == nil || err == io.EOF:
			return transportError(cerr)
		}
		return fmt.Errorf("differently: %w (reading the stream: %w)", cerr, err)
	}
	where := ""
	if inFrame {
		where = " (cut inside a frame)"
	}
	if err == nil || err == io.EOF {
		return fmt.Errorf("differently: %w%s", ErrStreamIncomplete, where)
	}
	return fmt.Errorf("differently: %w%s: %w", ErrStreamIncomplete, where, err)
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// yieldEvent yields ev, with an error when it carries one, and reports whether the
// stream goes on: the consumer wants more and ev is not final.
func yieldEvent(ev api.ExecEvent, yield func(api.ExecEvent, error) bool) bool {
	if ev.Error != "" {
		yield(ev, &StreamError{Code: ev.Code, Message: ev.Error})
		return false
	}
	return yield(ev, nil) && !ev.IsFinal()
}

// text is b as a JSON string carrying it decodes: each byte of invalid UTF-8 becomes
// U+FFFD, so that output reads the same from frames as from NDJSON.
func text(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	var s strings.Builder
	s.Grow(len(b) + 8)
	for len(b) > 0 {
		r, n := utf8.DecodeRune(b)
		if r == utf8.RuneError && n == 1 {
			s.WriteRune(utf8.RuneError)
		} else {
			s.Write(b[:n])
		}
		b = b[n:]
	}
	return s.String()
}
