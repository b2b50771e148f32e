package body

import (
	"errors"
	"io"
	"net/http"
	"time"
)

// Stream is a request body passed on as it is read rather than held whole (a file
// upload on its way to an adapter): it must arrive within the timeout given to
// NewStream, like ReadAllWithin's, and it remembers how reading it failed, so that
// the caller can tell a client that sent too much, too slowly or broke off from a
// backend that failed while taking it.
type Stream struct {
	r   io.Reader
	rc  *http.ResponseController
	w   http.ResponseWriter
	n   int64
	err error
	// end is when the whole body must have come; stall, when positive, how long
	// it may go without a byte (SetStall).
	end   time.Time
	stall time.Duration
}

// NewStream sets the read deadline of w's connection to now plus timeout; Done
// lifts it.
func NewStream(w http.ResponseWriter, r io.Reader, timeout time.Duration) *Stream {
	rc := http.NewResponseController(w)
	end := time.Now().Add(timeout)
	_ = rc.SetReadDeadline(end)
	return &Stream{r: r, rc: rc, w: w, end: end}
}

// SetStall bounds, within the timeout, how long the body may go without bringing a
// byte: the read deadline becomes the earlier of the two and moves with every read
// that brings some. The timeout is sized for the largest body at a slow rate; a
// client that declares a few bytes and sends none would otherwise hold its
// connection, and whatever the body holds, for all of it. 0 sets no such bound.
func (s *Stream) SetStall(d time.Duration) {
	s.stall = d
	s.moveDeadline()
}

func (s *Stream) moveDeadline() {
	if s.stall <= 0 {
		return
	}
	d := time.Now().Add(s.stall)
	if d.After(s.end) {
		d = s.end
	}
	_ = s.rc.SetReadDeadline(d)
}

// Read reads the body. It is meant for one reader at a time, as an io.Reader is.
func (s *Stream) Read(p []byte) (int, error) {
	if s.err != nil {
		return 0, s.err
	}
	n, err := s.r.Read(p)
	s.n += int64(n)
	if n > 0 {
		s.moveDeadline()
	}
	if err != nil && !errors.Is(err, io.EOF) {
		s.err = err
	}
	return n, err
}

// Err is how reading the body failed, or nil. Only call it once the reader is done
// with the stream.
func (s *Stream) Err() error { return s.err }

// Done ends the stream: after a failure the answer closes the connection and the
// deadline stays, so that nothing waits for the rest of the body before answering;
// otherwise the deadline is lifted.
func (s *Stream) Done(failed bool) {
	if failed || s.err != nil {
		s.w.Header().Set("Connection", "close")
		return
	}
	_ = s.rc.SetReadDeadline(time.Time{})
}
