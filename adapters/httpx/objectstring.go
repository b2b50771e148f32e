package httpx

import (
	"encoding/binary"
	"io"
	"unicode/utf16"
	"unicode/utf8"
)

// The strings of ReadObject: decoded as encoding/json decodes them, in pieces.

// str decodes a string whose opening quote was consumed into w, up to and
// including its closing quote. Runs of plain characters go to w as they are in
// the input; escapes and invalid UTF-8 are decoded one at a time, and written
// together.
func (d *objectReader) str(w io.Writer) error {
	dec := d.decoded[:0]
	defer func() { d.decoded = dec[:0] }()
	flush := func() error {
		if len(dec) == 0 {
			return nil
		}
		_, err := w.Write(dec)
		dec = dec[:0]
		return err
	}
	for {
		b, err := d.avail()
		if err != nil {
			return err
		}
		if i := plainPrefix(b); i > 0 {
			if err := flush(); err != nil {
				return err
			}
			if _, err := w.Write(b[:i]); err != nil {
				return err
			}
			if err := d.take(b[:i]); err != nil {
				return err
			}
			continue
		}
		r, done, err := d.special()
		switch {
		case err != nil:
			return err
		case done:
			return flush()
		}
		dec = utf8.AppendRune(dec, r)
		if len(dec) >= maxDecoded {
			if err := flush(); err != nil {
				return err
			}
		}
	}
}

// maxDecoded is how many bytes of characters decoded one at a time are written
// together.
const maxDecoded = 4 << 10

// plainPrefix is the length of b's prefix that is whole, valid UTF-8 characters
// other than '"', '\\' and control characters.
func plainPrefix(b []byte) int {
	i := 0
	for i < len(b) {
		// Eight bytes at a time while they are plain ASCII: output is mostly that,
		// and a string may be tens of megabytes.
		for i+8 <= len(b) && plainASCII(binary.LittleEndian.Uint64(b[i:])) {
			i += 8
		}
		if i == len(b) {
			break
		}
		c := b[i]
		if c < utf8.RuneSelf {
			if c == '"' || c == '\\' || c < 0x20 {
				return i
			}
			i++
			continue
		}
		r, size := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && size == 1 {
			return i // invalid, or cut by the end of the buffer
		}
		i += size
	}
	return i
}

// plainASCII reports whether the eight bytes of x are all ASCII and none of them
// is '"', '\\' or a control character.
func plainASCII(x uint64) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	hasZero := func(v uint64) uint64 { return (v - ones) & ^v & highs }
	special := x&highs | (x-0x20*ones)&^x&highs | hasZero(x^('"'*ones)) | hasZero(x^('\\'*ones))
	return special == 0
}

// special consumes what plainPrefix stops at and returns the character it stands
// for: an escape, or a byte that is not (yet) a valid character; done is set at the
// closing quote, and a control character is malformed.
func (d *objectReader) special() (r rune, done bool, err error) {
	b, err := d.br.Peek(utf8.UTFMax)
	if len(b) == 0 {
		return 0, false, d.fail(err)
	}
	n := 1
	switch c := b[0]; {
	case c == '"':
		return 0, true, d.take(b[:1])
	case c == '\\':
		if r, n, err = d.escape(); err != nil {
			return 0, false, err
		}
	case c < 0x20:
		return 0, false, d.malformed("invalid character %q in a string", c)
	default:
		// encoding/json turns each byte of invalid UTF-8 into U+FFFD. A character
		// cut short by the end of the buffer was read whole by Peek.
		r, n = utf8.DecodeRune(b)
	}
	b, _ = d.br.Peek(n)
	return r, false, d.take(b)
}

// escape decodes the escape sequence next in the input, returning the character
// and the sequence's length.
func (d *objectReader) escape() (rune, int, error) {
	b, err := d.br.Peek(2)
	if len(b) < 2 {
		return 0, 0, d.fail(err)
	}
	switch b[1] {
	case '"', '\\', '/':
		return rune(b[1]), 2, nil
	case 'b':
		return '\b', 2, nil
	case 'f':
		return '\f', 2, nil
	case 'n':
		return '\n', 2, nil
	case 'r':
		return '\r', 2, nil
	case 't':
		return '\t', 2, nil
	case 'u':
		return d.unicodeEscape()
	}
	return 0, 0, d.malformed("invalid escape %q in a string", b[:2])
}

// unicodeEscape decodes \uXXXX, and the \uXXXX after it when the two make a
// surrogate pair; a surrogate that is not half of a pair is U+FFFD.
func (d *objectReader) unicodeEscape() (rune, int, error) {
	b, err := d.br.Peek(12)
	switch {
	case err != nil && err != io.EOF:
		return 0, 0, err
	case len(b) < 6:
		return 0, 0, d.malformed("unexpected end of a \\u escape")
	}
	r := hex4(b[2:6])
	if r < 0 {
		return 0, 0, d.malformed("invalid escape %q in a string", b[:6])
	}
	if !utf16.IsSurrogate(r) {
		return r, 6, nil
	}
	if len(b) == 12 && b[6] == '\\' && b[7] == 'u' {
		if dec := utf16.DecodeRune(r, hex4(b[8:12])); dec != utf8.RuneError {
			return dec, 12, nil
		}
	}
	return utf8.RuneError, 6, nil
}

// hex4 decodes four hex digits, or returns -1.
func hex4(b []byte) rune {
	var r rune
	for _, c := range b[:4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			c = c - 'A' + 10
		default:
			return -1
		}
		r = r*16 + rune(c)
	}
	return r
}
