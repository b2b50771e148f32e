// Package body reads a request body into memory that grows only as the body
// arrives. A declared Content-Length is a client's word: memory reserved on it
// before the bytes come would let a client that declares the largest allowed body
// and sends nothing hold that much of the daemon's memory per request.
package body

import (
	"errors"
	"io"
	"net/http"
	"time"
)

// firstChunk is what ReadAll holds before any byte has come.
const firstChunk = 64 << 10

// ReadAll reads r to its end. declared is the body's Content-Length, or a negative
// number when unknown: the buffer doubles as the body arrives, but never past a
// declared length, so a body of exactly that length is held in exactly that much
// memory. r is expected to enforce the size limit (http.MaxBytesReader); ReadAll
// returns its error as it is.
func ReadAll(r io.Reader, declared int64) ([]byte, error) {
	size := int64(firstChunk)
	if declared >= 0 {
		size = min(size, declared)
	}
	buf := make([]byte, 0, size)
	for {
		if len(buf) == cap(buf) {
			if declared >= 0 && int64(len(buf)) >= declared {
				// The declared length has come: only the end of the body may follow.
				if err := atEnd(r); err != nil {
					return nil, err
				}
				return buf, nil
			}
			grow := max(cap(buf), firstChunk)
			if declared >= 0 {
				grow = int(min(int64(grow), declared-int64(len(buf))))
			}
			// Not slices.Grow, which rounds up past the declared length.
			next := make([]byte, len(buf), len(buf)+grow)
			copy(next, buf)
			buf = next
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if errors.Is(err, io.EOF) {
			return buf, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// ErrLonger is returned for a body that goes on past its declared length, which
// net/http's server never lets through; ReadAll does not guess which length is right.
var ErrLonger = errors.New("body: longer than its declared length")

// atEnd checks that r has nothing left.
func atEnd(r io.Reader) error {
	var one [1]byte
	for {
		n, err := r.Read(one[:])
		if n > 0 {
			return ErrLonger
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// ReadAllWithin is ReadAll of a request's body, which must arrive within timeout:
// a client that sends slowly, or stops, cannot hold its connection, and what it
// sent, for as long as it likes. The deadline is the kernel's, on the wall clock.
// When the read fails, the answer closes the connection and the deadline stays, so
// that nothing waits for the rest of the body before answering.
func ReadAllWithin(w http.ResponseWriter, r io.Reader, declared int64, timeout time.Duration) ([]byte, error) {
	return ReadAllWithinStall(w, r, declared, timeout, 0)
}

// ReadAllWithinStall is ReadAllWithin of a body that must also bring a byte at
// least every stall (Stream.SetStall; 0 sets no such bound).
func ReadAllWithinStall(w http.ResponseWriter, r io.Reader, declared int64, timeout, stall time.Duration) ([]byte, error) {
	s := NewStream(w, r, timeout)
	s.SetStall(stall)
	data, err := ReadAll(s, declared)
	s.Done(err != nil)
	if err != nil {
		return nil, err
	}
	return data, nil
}
