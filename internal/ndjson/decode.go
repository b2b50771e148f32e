package ndjson

import (
	"bytes"
	"encoding/json"
	"math"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/different-ai/differently/api"
)

// Decoder parses the lines of one stream. Its zero value is ready to use; it keeps
// a scratch buffer between lines, so one Decoder serves one goroutine.
type Decoder struct {
	scratch []byte
}

// Decode parses one line. Its result, error included, is always what json.Unmarshal
// into a zero api.ExecEvent gives. Lines shaped like the ones json.Marshal and
// AppendEvent write (no whitespace, each known key at most once, spelled exactly)
// take a fast path without reflection; any other line, valid or not, is handed to
// json.Unmarshal.
func (d *Decoder) Decode(line []byte) (api.ExecEvent, error) {
	if ev, ok := d.decodeFast(line); ok {
		return ev, nil
	}
	var ev api.ExecEvent
	err := json.Unmarshal(line, &ev)
	return ev, err
}

// Keys of api.ExecEvent, as bits of the set decodeFast has seen.
const (
	keyStream = 1 << iota
	keyData
	keyExitCode
	keyTimedOut
	keyError
	keyCode
)

// decodeFast parses line if it has the common shape, and reports false otherwise,
// whether or not the line is valid JSON.
func (d *Decoder) decodeFast(line []byte) (ev api.ExecEvent, ok bool) {
	if len(line) < 2 || line[0] != '{' || line[len(line)-1] != '}' {
		return ev, false
	}
	p := line[1 : len(line)-1]
	var seen int
	for len(p) > 0 {
		if seen != 0 {
			if p[0] != ',' {
				return ev, false
			}
			p = p[1:]
		}
		var k int
		switch {
		case bytes.HasPrefix(p, []byte(`"stream":`)):
			k, p = keyStream, p[len(`"stream":`):]
		case bytes.HasPrefix(p, []byte(`"data":`)):
			k, p = keyData, p[len(`"data":`):]
		case bytes.HasPrefix(p, []byte(`"exitCode":`)):
			k, p = keyExitCode, p[len(`"exitCode":`):]
		case bytes.HasPrefix(p, []byte(`"timedOut":`)):
			k, p = keyTimedOut, p[len(`"timedOut":`):]
		case bytes.HasPrefix(p, []byte(`"error":`)):
			k, p = keyError, p[len(`"error":`):]
		case bytes.HasPrefix(p, []byte(`"code":`)):
			k, p = keyCode, p[len(`"code":`):]
		default:
			return ev, false
		}
		if seen&k != 0 {
			return ev, false // a repeated key: the last one wins, leave that to encoding/json
		}
		seen |= k
		var n int
		ok = false
		switch k {
		case keyStream:
			ev.Stream, n, ok = d.decodeString(p, true)
		case keyData:
			ev.Data, n, ok = d.decodeString(p, false)
		case keyError:
			ev.Error, n, ok = d.decodeString(p, false)
		case keyCode:
			var code string
			code, n, ok = d.decodeString(p, false)
			ev.Code = api.Code(code)
		case keyExitCode:
			var code int
			code, n, ok = decodeInt(p)
			ev.ExitCode = &code
		case keyTimedOut:
			switch {
			case bytes.HasPrefix(p, []byte("true")):
				ev.TimedOut, n, ok = true, 4, true
			case bytes.HasPrefix(p, []byte("false")):
				n, ok = 5, true
			}
		}
		if !ok {
			return ev, false
		}
		p = p[n:]
	}
	return ev, true
}

// decodeInt parses a JSON integer that fits an int at the start of p and returns
// it and its length. Fractions and exponents, which encoding/json also accepts
// when their value is whole, and numbers out of range are left to it.
func decodeInt(p []byte) (v, n int, ok bool) {
	neg := len(p) > 0 && p[0] == '-'
	if neg {
		n = 1
	}
	start := n
	var u uint64
	for n < len(p) && p[n] >= '0' && p[n] <= '9' {
		if n-start == 19 {
			return 0, 0, false // 20 digits or more, which uint64 may not hold
		}
		u = u*10 + uint64(p[n]-'0')
		n++
	}
	switch {
	case n == start, p[start] == '0' && n > start+1:
		return 0, 0, false // no digits, or a leading zero: not JSON
	case n < len(p) && (p[n] == '.' || p[n] == 'e' || p[n] == 'E'):
		return 0, 0, false
	case !neg && u > math.MaxInt, neg && u > -math.MinInt:
		return 0, 0, false
	}
	if neg {
		return int(-u), n, true // -u wraps to the two's complement, MinInt included
	}
	return int(u), n, true
}

// plainBytes has a high bit set unless all eight bytes of x may appear as they are
// in a JSON string and mean themselves: ASCII, no control character, no '"' or '\\'.
func plainBytes(x uint64) uint64 {
	return (outsideASCIIText(x) | equalTo(x, '"') | equalTo(x, '\\')) & msb
}

// skipPlain returns the index of the first byte at or after i that the word test
// could not pass over: the next eight are not all plain, or fewer than eight remain.
func skipPlain(p []byte, i int) int {
	for i+16 <= len(p) && plainBytes(load64b(p, i))|plainBytes(load64b(p, i+8)) == 0 {
		i += 16
	}
	for i+8 <= len(p) && plainBytes(load64b(p, i)) == 0 {
		i += 8
	}
	return i
}

// asciiText reports whether p holds only bytes from 0x20 to 0x7f.
func asciiText(p []byte) bool {
	i := 0
	for ; i+16 <= len(p); i += 16 {
		if (outsideASCIIText(load64b(p, i))|outsideASCIIText(load64b(p, i+8)))&msb != 0 {
			return false
		}
	}
	for ; i < len(p); i++ {
		if p[i] < 0x20 || p[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

func load64b(p []byte, i int) uint64 {
	p = p[i : i+8]
	return uint64(p[0]) | uint64(p[1])<<8 | uint64(p[2])<<16 | uint64(p[3])<<24 |
		uint64(p[4])<<32 | uint64(p[5])<<40 | uint64(p[6])<<48 | uint64(p[7])<<56
}

// decodeString parses the JSON string at the start of p and returns its value and
// its length, quotes included. It decodes like encoding/json: escapes, surrogate
// pairs, U+FFFD for an unpaired surrogate and for each byte of invalid UTF-8. It
// reports false for anything that is not a valid string; encoding/json then gives
// the error. With stream set, the usual stream names come without an allocation.
func (d *Decoder) decodeString(p []byte, stream bool) (s string, n int, ok bool) {
	if len(p) == 0 || p[0] != '"' {
		return "", 0, false
	}
	i := 1
	// Output is mostly printable ASCII: find the closing quote and check there is no
	// escape before it with bytes.IndexByte, which is fast assembly on most platforms,
	// so that the word test has only non-text bytes to look for.
	if q := bytes.IndexByte(p[1:], '"'); q >= 0 && bytes.IndexByte(p[1:1+q], '\\') < 0 && asciiText(p[1:1+q]) {
		i = 1 + q
	}
	for {
		i = skipPlain(p, i)
		if i >= len(p) {
			return "", 0, false
		}
		switch c := p[i]; {
		case c == '"':
			raw := p[1:i]
			if stream {
				switch string(raw) {
				case api.StreamStdout:
					return api.StreamStdout, i + 1, true
				case api.StreamStderr:
					return api.StreamStderr, i + 1, true
				}
			}
			return string(raw), i + 1, true
		case c < 0x20:
			return "", 0, false
		case c == '\\':
			return d.unescapeString(p, i)
		case c < utf8.RuneSelf:
			i++
		default:
			r, size := utf8.DecodeRune(p[i:])
			if r == utf8.RuneError && size == 1 {
				return d.unescapeString(p, i)
			}
			i += size
		}
	}
}

// unescapeString finishes decodeString for a string with escapes or invalid UTF-8,
// the first of which is at p[i]; p[1:i] needs no change. It decodes into the
// scratch buffer, whose size then is the string's, and copies that once.
func (d *Decoder) unescapeString(p []byte, i int) (string, int, bool) {
	b := append(d.scratch[:0], p[1:i]...)
	defer func() {
		// Keep what output events need (1 MiB each), not a rare huge line's worth.
		if cap(b) <= 2*maxEventData {
			d.scratch = b[:0]
		}
	}()
	start := i // p[start:i] is plain and not yet copied
	for i < len(p) {
		c := p[i]
		switch {
		case c == '\\':
			if start < i {
				b = append(b, p[start:i]...)
			}
			// \u00XX first, a word at a time: runs of control characters come as those.
			for i+8 <= len(p) {
				w := load64b(p, i)
				hi, lo := hexValue[byte(w>>32)], hexValue[byte(w>>40)]
				if w&0xffffffff != escapeU00 || hi >= 8 || lo > 0xf {
					break
				}
				b = append(b, hi<<4|lo)
				i += 6
			}
			start = i
			if i >= len(p) || p[i] != '\\' {
				continue
			}
			var n int
			var ok bool
			if b, n, ok = appendUnescaped(b, p[i:]); !ok {
				return "", 0, false
			}
			i += n
			start = i
		case c == '"':
			b = append(b, p[start:i]...)
			return string(b), i + 1, true
		case c < 0x20:
			return "", 0, false
		case c < utf8.RuneSelf:
			i = skipPlain(p, i+1)
		default:
			r, size := utf8.DecodeRune(p[i:])
			if r == utf8.RuneError && size == 1 {
				b = utf8.AppendRune(append(b, p[start:i]...), utf8.RuneError)
				i++
				start = i
				continue
			}
			i += size
		}
	}
	return "", 0, false
}

// escapeU00 is `\u00` as the low half of a little-endian word.
const escapeU00 = uint64('\\') | uint64('u')<<8 | uint64('0')<<16 | uint64('0')<<24

// appendUnescaped appends the value of the escape at the start of p (a backslash)
// and returns its length.
func appendUnescaped(b, p []byte) ([]byte, int, bool) {
	if len(p) < 2 {
		return b, 0, false
	}
	switch c := p[1]; c {
	case '"', '\\', '/':
		b = append(b, c)
	case 'b':
		b = append(b, '\b')
	case 'f':
		b = append(b, '\f')
	case 'n':
		b = append(b, '\n')
	case 'r':
		b = append(b, '\r')
	case 't':
		b = append(b, '\t')
	case 'u':
		r := hex4(p[2:])
		if r < 0 {
			return b, 0, false
		}
		if r < utf8.RuneSelf {
			return append(b, byte(r)), 6, true
		}
		if utf16.IsSurrogate(r) {
			// A pair only when a second escape follows and completes it; otherwise
			// this one alone is U+FFFD and the next is read on its own.
			if len(p) >= 12 && p[6] == '\\' && p[7] == 'u' {
				if r2 := hex4(p[8:]); r2 >= 0 {
					if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
						return utf8.AppendRune(b, dec), 12, true
					}
				}
			}
			r = utf8.RuneError
		}
		return utf8.AppendRune(b, r), 6, true
	default:
		return b, 0, false
	}
	return b, 2, true
}

// hex4 is the value of the four hex digits at the start of p, or -1.
func hex4(p []byte) rune {
	if len(p) < 4 {
		return -1
	}
	a, b, c, d := hexValue[p[0]], hexValue[p[1]], hexValue[p[2]], hexValue[p[3]]
	if a|b|c|d > 0xf {
		return -1
	}
	return rune(a)<<12 | rune(b)<<8 | rune(c)<<4 | rune(d)
}

// hexValue maps a hex digit to its value and any other byte to 0xff.
var hexValue = func() (t [256]byte) {
	for i := range t {
		t[i] = 0xff
	}
	for i, c := range "0123456789abcdef" {
		t[c] = byte(i)
	}
	for i, c := range "ABCDEF" {
		t[c] = byte(10 + i)
	}
	return t
}()
