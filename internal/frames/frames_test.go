package frames

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"strings"
	"testing"
)

type frame struct {
	kind    Kind
	payload string
}

func encode(fs ...frame) []byte {
	var b []byte
	for _, f := range fs {
		b = Append(b, f.kind, f.payload)
	}
	return b
}

// header is a header written by hand, so that a test can claim any length.
func header(kind byte, n uint32) []byte {
	return binary.BigEndian.AppendUint32([]byte{kind}, n)
}

// readAll reads frames until an error, copying each payload.
func readAll(r io.Reader) ([]frame, error) {
	fr := NewReader(r)
	var out []frame
	for {
		k, p, err := fr.Next()
		if err != nil {
			return out, err
		}
		out = append(out, frame{k, string(p)})
	}
}

// TestRoundTrip: what Append writes, Reader reads back, frame for frame, until a
// clean io.EOF at the end.
func TestRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name   string
		frames []frame
	}{
		{"none", nil},
		{"empty payloads", []frame{{Stdout, ""}, {Stderr, ""}, {Final, ""}}},
		{"NUL bytes", []frame{{Stdout, "\x00\x00\x00"}, {Stderr, strings.Repeat("\x00", 70000)}, {Final, `{"exitCode":0}`}}},
		{"bytes that are not text", []frame{{Stdout, "\xff\xfe\r\n\"\\\u2028"}, {Final, `{"exitCode":124,"timedOut":true}`}}},
		{"larger than the read buffer", []frame{{Stdout, strings.Repeat("x", readBuffer+1)}, {Stdout, "y"}, {Final, `{"error":"gone"}`}}},
		{"max size", []frame{{Stdout, strings.Repeat("m", MaxPayload)}, {Final, `{"exitCode":0}`}}},
		{"many small after a large", append([]frame{{Stderr, strings.Repeat("e", 3<<20)}}, repeat(frame{Stdout, "ab"}, 1000)...)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := readAll(bytes.NewReader(encode(tc.frames...)))
			if err != io.EOF {
				t.Fatalf("ended with %v, want io.EOF", err)
			}
			if len(got) != len(tc.frames) {
				t.Fatalf("read %d frames, wrote %d", len(got), len(tc.frames))
			}
			for i := range got {
				if got[i] != tc.frames[i] {
					t.Fatalf("frame %d: read %v with %d bytes, wrote %v with %d", i, got[i].kind, len(got[i].payload), tc.frames[i].kind, len(tc.frames[i].payload))
				}
			}
		})
	}
}

func repeat(f frame, n int) []frame {
	out := make([]frame, n)
	for i := range out {
		out[i] = f
	}
	return out
}

// TestMalformed: a cut stream, an oversize length and an unknown kind each end the
// reading with their own error, after the frames before them.
func TestMalformed(t *testing.T) {
	ok := encode(frame{Stdout, "before"})
	for _, tc := range []struct {
		name string
		tail []byte
		want error
	}{
		{"cut in the header", header(byte(Stdout), 10)[:3], io.ErrUnexpectedEOF},
		{"cut in the payload", append(header(byte(Stdout), 10), "12345"...), io.ErrUnexpectedEOF},
		{"cut before a payload", header(byte(Final), 1), io.ErrUnexpectedEOF},
		{"one byte over the limit", header(byte(Stdout), MaxPayload+1), ErrTooLarge},
		{"the largest length", header(byte(Stderr), 1<<32-1), ErrTooLarge},
		{"kind zero", header(0, 1), ErrUnknownKind},
		{"kind four", append(header(4, 1), 'x'), ErrUnknownKind},
		{"kind 255", header(255, MaxPayload+1), ErrUnknownKind},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := readAll(bytes.NewReader(append(ok[:len(ok):len(ok)], tc.tail...)))
			if !errors.Is(err, tc.want) {
				t.Fatalf("ended with %v, want %v", err, tc.want)
			}
			if len(got) != 1 || got[0] != (frame{Stdout, "before"}) {
				t.Fatalf("frames before the error: %v", got)
			}
		})
	}
}

// TestLimitMessage: a frame over the limit is refused with an error naming both its
// length and the limit.
func TestLimitMessage(t *testing.T) {
	_, err := readAll(bytes.NewReader(header(byte(Stdout), MaxPayload+1)))
	if want := "frames: frame too large: 8388609 bytes, over the limit of 8388608"; err == nil || err.Error() != want {
		t.Fatalf("error %v, want %q", err, want)
	}
}

// TestClaimCostsNothing: a header that claims the most a frame may hold and then
// stops costs the reader memory in proportion to what came, not to the claim; a
// claim over the limit costs nothing.
func TestClaimCostsNothing(t *testing.T) {
	fr := NewReader(bytes.NewReader(append(header(byte(Stdout), MaxPayload), "only this"...)))
	if _, _, err := fr.Next(); err != io.ErrUnexpectedEOF {
		t.Fatalf("error %v", err)
	}
	if c := cap(fr.buf); c > 2*firstPayload {
		t.Fatalf("a buffer of %d bytes for 9 bytes of payload", c)
	}

	fr = NewReader(io.MultiReader(bytes.NewReader(header(byte(Stdout), MaxPayload+1)), strings.NewReader(strings.Repeat("x", 1<<20))))
	if _, _, err := fr.Next(); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("error %v", err)
	}
	if cap(fr.buf) != 0 {
		t.Fatalf("allocated %d bytes for a refused frame", cap(fr.buf))
	}
}

// TestAppendHeaderRefusesOversize: a writer cannot write a frame a reader refuses.
func TestAppendHeaderRefusesOversize(t *testing.T) {
	for _, n := range []int{-1, MaxPayload + 1} {
		func() {
			defer func() {
				if recover() == nil {
					t.Fatalf("AppendHeader(%d) did not panic", n)
				}
			}()
			AppendHeader(nil, Stdout, n)
		}()
	}
}

func TestOutputKind(t *testing.T) {
	for stream, want := range map[string]Kind{"stdout": Stdout, "stderr": Stderr, "": 0, "stdin": 0, "Stdout": 0} {
		k, ok := OutputKind(stream)
		if k != want || ok != (want != 0) {
			t.Errorf("OutputKind(%q) = %v, %v", stream, k, ok)
		}
		if ok && k.String() != stream {
			t.Errorf("%v.String() = %q", k, k.String())
		}
	}
}
