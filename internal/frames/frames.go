// Package frames is the binary format of a streamed exec, the alternative to NDJSON
// that a client asks for with Accept: application/vnd.differently.exec-frames.
//
// A stream is a sequence of frames, each a 5-byte header and a payload:
//
//	offset 0  kind    1 byte: 1 stdout, 2 stderr, 3 final
//	offset 1  length  4 bytes, big-endian: the payload's length, at most MaxPayload
//	offset 5  payload length bytes
//
// Output frames (stdout, stderr) carry the command's bytes as they are, without
// escaping. The last frame is the one final frame, whose payload is the JSON object
// an NDJSON stream ends with ({"exitCode":0}, {"exitCode":124,"timedOut":true},
// {"error":"..."}), without its newline. Nothing follows it.
package frames

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/different-ai/differently/api"
)

// ContentType is the media type of a framed exec stream.
const ContentType = "application/vnd.differently.exec-frames"

// HeaderSize is the length of a frame's header: its kind and its payload's length.
const HeaderSize = 5

// MaxPayload bounds one frame's payload, as api.MaxStreamLineBytes bounds one NDJSON
// line. A reader refuses a longer frame without reading it.
const MaxPayload = api.MaxStreamLineBytes

// Kind says what a frame's payload is.
type Kind uint8

// The kinds of frame. Zero is none of them, so a stream of zeros is refused at once.
const (
	Stdout Kind = 1
	Stderr Kind = 2
	Final  Kind = 3
)

func (k Kind) String() string {
	switch k {
	case Stdout:
		return api.StreamStdout
	case Stderr:
		return api.StreamStderr
	case Final:
		return "final"
	}
	return fmt.Sprintf("kind %d", uint8(k))
}

// OutputKind is the kind of an output frame of the named stream (api.StreamStdout or
// api.StreamStderr); ok is false for any other name.
func OutputKind(stream string) (k Kind, ok bool) {
	switch stream {
	case api.StreamStdout:
		return Stdout, true
	case api.StreamStderr:
		return Stderr, true
	}
	return 0, false
}

// Errors a Reader returns, wrapped with the details.
var (
	// ErrTooLarge: a header announces a payload over MaxPayload.
	ErrTooLarge = errors.New("frames: frame too large")
	// ErrUnknownKind: a header's kind is not one of Stdout, Stderr and Final.
	ErrUnknownKind = errors.New("frames: unknown frame kind")
)

// AppendHeader appends the header of a frame of kind k with a payload of n bytes. n
// must be between 0 and MaxPayload.
func AppendHeader(dst []byte, k Kind, n int) []byte {
	if n < 0 || n > MaxPayload {
		panic(fmt.Sprintf("frames: payload of %d bytes", n))
	}
	return binary.BigEndian.AppendUint32(append(dst, byte(k)), uint32(n))
}

// Append appends one whole frame. The payload must be at most MaxPayload bytes.
func Append[S string | []byte](dst []byte, k Kind, payload S) []byte {
	return append(AppendHeader(dst, k, len(payload)), payload...)
}

// Reader reads frames from a stream.
type Reader struct {
	r   *bufio.Reader
	hdr [HeaderSize]byte
	buf []byte // the last payload; reused
}

// readBuffer is the size of the Reader's buffer: headers and small frames are read
// from it, and a payload longer than what it holds goes straight into the payload.
const readBuffer = 64 << 10

// firstPayload is the most a Reader allocates for a payload before any of it came:
// a longer one grows as it arrives, at most doubling, so a header claiming megabytes
// costs nothing until they are sent.
const firstPayload = 64 << 10

// NewReader reads frames from r.
func NewReader(r io.Reader) *Reader {
	return &Reader{r: bufio.NewReaderSize(r, readBuffer)}
}

// Next reads the next frame. The payload is valid until the next call. At the end of
// the stream, between two frames, it returns io.EOF; a stream cut inside a frame is
// io.ErrUnexpectedEOF. A header announcing more than MaxPayload bytes (ErrTooLarge)
// or an unknown kind (ErrUnknownKind) is refused before its payload is read.
func (fr *Reader) Next() (Kind, []byte, error) {
	if _, err := io.ReadFull(fr.r, fr.hdr[:]); err != nil {
		return 0, nil, err
	}
	k := Kind(fr.hdr[0])
	n := binary.BigEndian.Uint32(fr.hdr[1:])
	if k != Stdout && k != Stderr && k != Final {
		return 0, nil, fmt.Errorf("%w: %d", ErrUnknownKind, fr.hdr[0])
	}
	if n > MaxPayload {
		return 0, nil, fmt.Errorf("%w: %d bytes, over the limit of %d", ErrTooLarge, n, MaxPayload)
	}
	p, err := fr.readPayload(int(n))
	if errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	return k, p, err
}

// readPayload reads n bytes into fr.buf, growing it only as the bytes come.
func (fr *Reader) readPayload(n int) ([]byte, error) {
	buf := fr.buf[:0]
	for len(buf) < n {
		if len(buf) == cap(buf) {
			buf = slices.Grow(buf, min(n-len(buf), max(len(buf), firstPayload)))
		}
		m, err := io.ReadFull(fr.r, buf[len(buf):min(n, cap(buf))])
		buf = buf[:len(buf)+m]
		if err != nil {
			fr.buf = buf
			return nil, err
		}
	}
	fr.buf = buf
	return buf, nil
}
