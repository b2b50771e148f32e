package frames

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

// FuzzReader reads arbitrary bytes as frames. It never panics; each frame it returns
// has a known kind and a payload within the limit; the frames read, written again
// with Append, are exactly the input's first bytes, all of them when it ends with a
// clean io.EOF; and any other end is one of the documented errors. The seed corpus
// is in testdata/fuzz/FuzzReader.
func FuzzReader(f *testing.F) {
	f.Add(encode(frame{Stdout, "hi\n"}, frame{Stderr, "\x00"}, frame{Final, `{"exitCode":0}`}))
	f.Add(encode(frame{Stdout, ""}, frame{Final, `{"error":"x"}`}))
	f.Add(header(byte(Stdout), MaxPayload+1))
	f.Add(header(9, 0))
	f.Fuzz(func(t *testing.T, in []byte) {
		var out []byte
		fr := NewReader(bytes.NewReader(in))
		for {
			k, p, err := fr.Next()
			if err != nil {
				switch {
				case err == io.EOF:
					if !bytes.Equal(out, in) {
						t.Fatalf("a clean end after %d of %d bytes", len(out), len(in))
					}
				case err == io.ErrUnexpectedEOF, errors.Is(err, ErrTooLarge), errors.Is(err, ErrUnknownKind):
					if !bytes.HasPrefix(in, out) || len(out) == len(in) {
						t.Fatalf("%v after reading %d of %d bytes", err, len(out), len(in))
					}
				default:
					t.Fatalf("unexpected error %v", err)
				}
				return
			}
			if k != Stdout && k != Stderr && k != Final || len(p) > MaxPayload {
				t.Fatalf("a frame of %v with %d bytes", k, len(p))
			}
			out = Append(out, k, p)
		}
	})
}
