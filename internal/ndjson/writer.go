// Package ndjson writes streamed exec answers: one api.ExecEvent per line, flushed as
// produced, ending with exactly one final event. The public API and the adapter
// protocol stream the same way, so both use this writer. The same writer also
// answers in the binary format of package frames, for clients that ask for it: the
// same events, output as raw bytes and the final event as its JSON line.
package ndjson

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"unicode/utf8"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/internal/frames"
)

// ContentType is the media type of a streamed exec answer.
const ContentType = "application/x-ndjson"

// maxEventData bounds the data of one event. JSON escaping can grow a byte to six
// (\u00XX), so 1 MiB of data always encodes to a line under api.MaxStreamLineBytes.
const maxEventData = 1 << 20

// ErrClosed is returned to an emit that comes after the stream ended.
var ErrClosed = errors.New("ndjson: emit called after the stream ended")

// ExecWriter streams one exec. It sends the 200 status only with the first line, so
// that an error before any output still reaches the client as an error envelope with
// its status. Its mutex serialises Emit against Finish and keeps an adapter that emits
// after returning from writing to a finished answer.
type ExecWriter struct {
	w      http.ResponseWriter
	rc     *http.ResponseController
	framed bool // frames instead of lines

	mu      sync.Mutex
	started bool
	closed  bool
	line    []byte // the line or frame being written, kept for the next one
}

// NewExecWriter streams NDJSON to w.
func NewExecWriter(w http.ResponseWriter) *ExecWriter {
	return &ExecWriter{w: w, rc: http.NewResponseController(w)}
}

// NewFramedExecWriter streams to w in the format of package frames: output events
// are frames of raw bytes, cut where NDJSON lines would be cut, and the final event
// is a final frame holding the line an NDJSON stream would end with.
func NewFramedExecWriter(w http.ResponseWriter) *ExecWriter {
	return &ExecWriter{w: w, rc: http.NewResponseController(w), framed: true}
}

func (n *ExecWriter) writeLocked(ev api.ExecEvent) error {
	if !n.framed {
		n.line = AppendEvent(n.line[:0], ev)
		return n.writeLineLocked(nil)
	}
	// The line goes after room for the header, written in place once the payload's
	// length is known; the payload is the line without its newline.
	n.line = AppendEvent(append(n.line[:0], make([]byte, frames.HeaderSize)...), ev)
	size := len(n.line) - frames.HeaderSize - 1
	if size > frames.MaxPayload {
		return fmt.Errorf("ndjson: a final event of %d bytes does not fit a frame", size)
	}
	frames.AppendHeader(n.line[:0], frames.Final, size)
	n.line = n.line[:frames.HeaderSize+size]
	return n.writeLineLocked(nil)
}

// writeLineLocked writes n.line and then payload, after the status line if it is the
// first, and flushes.
func (n *ExecWriter) writeLineLocked(payload []byte) error {
	if !n.started {
		n.started = true
		h := n.w.Header()
		if n.framed {
			h.Set("Content-Type", frames.ContentType)
		} else {
			h.Set("Content-Type", ContentType)
		}
		h.Set("Cache-Control", "no-store")
		h.Set("X-Content-Type-Options", "nosniff")
		n.w.WriteHeader(http.StatusOK)
	}
	if _, err := n.w.Write(n.line); err != nil {
		return err
	}
	if len(payload) > 0 {
		if _, err := n.w.Write(payload); err != nil {
			return err
		}
	}
	// Without a flush output would sit in the server's buffer and arrive in bursts.
	if err := n.rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	return nil
}

// Emit forwards an output event in pieces of at most 1 MiB. Only Stream and Data are
// copied, so an adapter cannot end the stream with a final event of its own.
func (n *ExecWriter) Emit(ev api.ExecEvent) error {
	return emit(n, ev.Stream, ev.Data)
}

// EmitBytes is Emit of {Stream: stream, Data: string(data)}, without making the
// string: data is used only during the call. It is the emit of
// adapters.ByteStreamer.
func (n *ExecWriter) EmitBytes(stream string, data []byte) error {
	return emit(n, stream, data)
}

func emit[S string | []byte](n *ExecWriter, stream string, data S) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return ErrClosed
	}
	kind, ok := frames.OutputKind(stream)
	if n.framed && !ok {
		return fmt.Errorf("ndjson: output stream %q is neither stdout nor stderr", stream)
	}
	for len(data) > 0 {
		k := min(len(data), maxEventData)
		// Cut on a rune boundary: AppendEvent, like json.Marshal, would replace half
		// a character with U+FFFD on both sides of the cut.
		for k < len(data) && k > maxEventData-utf8.UTFMax && !utf8.RuneStart(data[k]) {
			k--
		}
		var payload []byte
		switch b, isBytes := any(data[:k]).([]byte); {
		case !n.framed:
			n.line = appendOutput(n.line[:0], stream, data[:k])
		case isBytes:
			// The header alone, the bytes after it without a copy.
			n.line, payload = frames.AppendHeader(n.line[:0], kind, k), b
		default:
			n.line = frames.Append(n.line[:0], kind, data[:k])
		}
		if err := n.writeLineLocked(payload); err != nil {
			return err
		}
		data = data[k:]
	}
	return nil
}

// Exec runs req on a, streaming its output to n, and returns the final event for
// Finish. It takes the adapter's ByteStreamer fast path when there is one;
// otherwise it is adapters.ExecStream with n.Emit.
func (n *ExecWriter) Exec(ctx context.Context, a adapters.ExecutionAdapter, streaming bool, ref string, req api.ExecRequest) (api.ExecEvent, error) {
	if b, ok := a.(adapters.ByteStreamer); ok && streaming {
		st, err := b.ExecStreamBytes(ctx, ref, req, n.EmitBytes)
		if err != nil {
			return api.ExecEvent{}, err
		}
		return api.ExitEvent(st.Code, st.TimedOut), nil
	}
	return adapters.ExecStream(ctx, a, streaming, ref, req, n.Emit)
}

// Finish ends the stream: with the final event when err is nil; otherwise, before
// any output, by calling writeError to answer an error envelope, and after output
// started with a final {"error": message, "code": code} line, message and code being
// what describe says of err (the status line is gone; an empty code is left out).
func (n *ExecWriter) Finish(final api.ExecEvent, err error, writeError func(http.ResponseWriter, error), describe func(error) (string, api.Code)) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.closed = true
	switch {
	case err == nil:
		_ = n.writeLocked(final)
	case !n.started:
		writeError(n.w, err)
	default:
		msg, code := describe(err)
		_ = n.writeLocked(api.ExecEvent{Error: msg, Code: code})
	}
}

// Started reports whether any line was written.
func (n *ExecWriter) Started() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.started
}
