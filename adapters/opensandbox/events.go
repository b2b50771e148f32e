package opensandbox

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math"
	"unicode/utf8"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/adapters/httpx"
)

const (
	// maxLineBytes bounds the part of a line of execd's stream held at once. execd
	// sends a line of output as one event on one line, so a longer line is a longer
	// line of output: it is decoded as it is read and its text passed on in pieces
	// of at most this size.
	maxLineBytes = 1 << 20
	// maxEventBytes bounds one event spread over several SSE data lines, and the text
	// held of a long event whose type comes after its text (execd sends the type
	// first, so its events never wait).
	maxEventBytes = 16 << 20
)

// errStopped ends the reading of a long event whose handler asked to stop.
var errStopped = errors.New("opensandbox: stopped")

// execEvent is one event of execd's command stream.
type execEvent struct {
	Type  string `json:"type"`
	Text  string `json:"text,omitempty"`
	Error *struct {
		EName  string `json:"ename"`
		EValue string `json:"evalue"`
	} `json:"error,omitempty"`
	// more is set on the second and later pieces of a long event's text: they
	// continue the line the first piece began.
	more bool
}

// readEvents parses execd's stream: SSE "data:" lines or bare JSON objects, each
// event ended by a blank line. handle returns true to stop reading. The text of an
// event on a line over maxLineBytes reaches handle in pieces, each event but the
// first with more set.
func readEvents(body io.Reader, handle func(execEvent) (bool, error)) error {
	r := eventReader{br: bufio.NewReaderSize(body, 64<<10), handle: handle, maxLine: maxLineBytes, maxEvent: maxEventBytes}
	return r.read()
}

// eventReader is the state of one readEvents.
type eventReader struct {
	br     *bufio.Reader
	handle func(execEvent) (bool, error)
	// maxLine and maxEvent are maxLineBytes and maxEventBytes, which tests lower
	// (with a buffer smaller than maxLine).
	maxLine, maxEvent int
	buf               []byte // the data lines of the event being read
}

func (r *eventReader) read() error {
	for {
		line, long, err := r.readLine()
		if long {
			stop, herr := r.readLong(line)
			if stop || herr != nil {
				return herr
			}
			continue
		}
		if len(line) > 0 || err == nil {
			if stop, herr := r.add(bytes.TrimSuffix(line, []byte("\r"))); stop || herr != nil {
				return herr
			}
		}
		if err != nil {
			if err == io.EOF {
				_, herr := r.dispatch()
				return herr
			}
			return err
		}
	}
}

// add takes one whole line: a blank one ends the event, another adds to it.
func (r *eventReader) add(line []byte) (bool, error) {
	if len(line) == 0 {
		return r.dispatch()
	}
	content, ok := lineData(line)
	if !ok {
		return false, nil
	}
	if len(r.buf) > 0 {
		r.buf = append(r.buf, '\n')
	}
	r.buf = append(r.buf, content...)
	if len(r.buf) > r.maxEvent {
		return true, adapters.Unavailable("opensandbox execd: an event is over %d MiB", r.maxEvent>>20)
	}
	// A complete JSON object is an event even before its blank line.
	if json.Valid(r.buf) {
		return r.dispatch()
	}
	return false, nil
}

// dispatch hands the event read so far to handle.
func (r *eventReader) dispatch() (bool, error) {
	data := bytes.TrimSpace(r.buf)
	r.buf = r.buf[:0]
	if len(data) == 0 {
		return false, nil
	}
	var ev execEvent
	if err := json.Unmarshal(data, &ev); err != nil {
		return true, adapters.Unavailable("opensandbox execd: malformed event: %v", err)
	}
	return r.handle(ev)
}

// lineData returns what a non-blank line adds to its event's JSON: the value of a
// "data:" line, or a bare line whole. Comments and the other SSE fields add
// nothing (ok false).
func lineData(line []byte) (content []byte, ok bool) {
	switch {
	case line[0] == ':', bytes.HasPrefix(line, []byte("event:")), bytes.HasPrefix(line, []byte("id:")), bytes.HasPrefix(line, []byte("retry:")):
		return nil, false
	case bytes.HasPrefix(line, []byte("data:")):
		return bytes.TrimPrefix(bytes.TrimPrefix(line, []byte("data:")), []byte(" ")), true
	}
	return line, true
}

// readLine reads one line without its newline. Of a line over maxLine it returns
// about the first maxLine bytes, with long set, and leaves the rest in br.
func (r *eventReader) readLine() (line []byte, long bool, err error) {
	for {
		chunk, err := r.br.ReadSlice('\n')
		line = append(line, chunk...)
		if err == bufio.ErrBufferFull {
			if len(line) >= r.maxLine {
				return line, true, nil
			}
			continue
		}
		return bytes.TrimSuffix(line, []byte("\n")), false, err
	}
}

// readLong reads an event whose line is over maxLine without holding it: start is
// the line's beginning, its rest is still in br, and buf holds the event's earlier
// data lines. The event must end on this line, as every event execd sends does.
// Its text goes to handle in pieces as it is decoded (see longText), then the rest
// of the event with no text.
func (r *eventReader) readLong(start []byte) (bool, error) {
	rest := &lineRest{br: r.br}
	content, ok := lineData(start)
	if !ok {
		_, err := io.Copy(io.Discard, rest)
		return false, err
	}
	head := content
	if len(r.buf) > 0 {
		head = append(append(r.buf, '\n'), content...)
	}
	r.buf = r.buf[:0]
	t := &longText{handle: r.handle, maxPiece: r.maxLine, maxHeld: r.maxEvent}
	// A line of output may be of any length: the command's timeout bounds it, as
	// it bounds the stream.
	err := httpx.ReadObject(io.MultiReader(bytes.NewReader(head), rest), math.MaxInt64, httpx.Fields{
		Strings: map[string]io.Writer{"text": t},
		Values:  map[string]any{"type": &t.ev.Type, "error": &t.ev.Error},
	})
	var malformed *httpx.MalformedError
	switch {
	case errors.Is(err, errStopped):
		return true, nil
	case errors.As(err, &malformed):
		return true, adapters.Unavailable("opensandbox execd: malformed event: %v", err)
	case err != nil:
		return true, err
	}
	return t.finish()
}

// lineRest reads the rest of br's current line, then ends; the newline is consumed
// but not returned.
type lineRest struct {
	br   *bufio.Reader
	done bool
}

func (l *lineRest) Read(p []byte) (int, error) {
	if l.done {
		return 0, io.EOF
	}
	if _, err := l.br.Peek(1); err != nil {
		return 0, err
	}
	b, _ := l.br.Peek(min(l.br.Buffered(), len(p)))
	if i := bytes.IndexByte(b, '\n'); i >= 0 {
		b, l.done = b[:i], true
		n := copy(p, b)
		_, _ = l.br.Discard(n + 1)
		return n, nil
	}
	n := copy(p, b)
	_, _ = l.br.Discard(n)
	return n, nil
}

// longText passes the text of a long event to handle as ReadObject decodes it, in
// pieces of at most maxPiece bytes. A piece is passed on once the event's type is
// known: the text of an output event is held only until then (at most maxHeld
// bytes of it), and that of any other event not at all.
type longText struct {
	ev                execEvent // the type and error, decoded as they come
	handle            func(execEvent) (bool, error)
	maxPiece, maxHeld int
	pending           []byte
	sent              bool // a piece went out
}

// Write takes whole characters (ReadObject writes no less), so every piece is
// whole characters too.
func (t *longText) Write(p []byte) (int, error) {
	switch {
	case t.ev.Type == "":
		if len(t.pending)+len(p) > t.maxHeld {
			return 0, adapters.Unavailable("opensandbox execd: an event of over %d MiB names its type after its text", t.maxHeld>>20)
		}
	case !isOutput(t.ev.Type):
		return len(p), nil
	case len(t.pending)+len(p) > t.maxPiece:
		if err := t.flush(); err != nil {
			return 0, err
		}
	}
	t.pending = append(t.pending, p...)
	return len(p), nil
}

// flush passes the pending text on, in pieces of at most maxPiece bytes cut
// between characters; an event with no text at all still goes out, as one empty
// piece.
func (t *longText) flush() error {
	rest := t.pending
	for len(rest) > 0 || !t.sent {
		n := min(len(rest), t.maxPiece)
		for n < len(rest) && n > 0 && !utf8.RuneStart(rest[n]) {
			n--
		}
		piece := t.ev
		piece.Text, piece.more = string(rest[:n]), t.sent
		rest, t.sent = rest[n:], true
		stop, err := t.handle(piece)
		if err != nil {
			return err
		}
		if stop {
			return errStopped
		}
	}
	t.pending = t.pending[:0]
	return nil
}

// finish passes on what is left of the event once it has been read.
func (t *longText) finish() (bool, error) {
	if !isOutput(t.ev.Type) {
		return t.handle(t.ev)
	}
	switch err := t.flush(); {
	case errors.Is(err, errStopped):
		return true, nil
	case err != nil:
		return true, err
	}
	return false, nil
}

func isOutput(eventType string) bool { return eventType == "stdout" || eventType == "stderr" }
