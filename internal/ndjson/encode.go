package ndjson

import (
	"encoding/binary"
	"strconv"
	"unicode/utf8"

	"github.com/different-ai/differently/api"
)

// AppendEvent appends ev to dst as one NDJSON line: exactly the bytes json.Marshal
// gives for it, then a newline. It is the writer's hot path, so it avoids
// reflection and copies runs of bytes that need no escaping in one go.
func AppendEvent(dst []byte, ev api.ExecEvent) []byte {
	return appendEvent(dst, ev.Stream, ev.Data, ev)
}

// appendOutput is AppendEvent of an output event, {Stream: stream, Data: data}.
func appendOutput[S string | []byte](dst []byte, stream string, data S) []byte {
	return appendEvent(dst, stream, data, api.ExecEvent{})
}

// appendEvent writes stream and data, then the final fields of ev.
func appendEvent[S string | []byte](dst []byte, stream string, data S, ev api.ExecEvent) []byte {
	dst = append(dst, '{')
	// key appends a member's key, after a comma unless it is the first member.
	first := true
	key := func(dst []byte, k string) []byte {
		if !first {
			dst = append(dst, ',')
		}
		first = false
		return append(dst, k...)
	}
	if stream != "" {
		dst = appendString(key(dst, `"stream":`), stream)
	}
	if len(data) > 0 {
		dst = appendString(key(dst, `"data":`), data)
	}
	if ev.ExitCode != nil {
		dst = strconv.AppendInt(key(dst, `"exitCode":`), int64(*ev.ExitCode), 10)
	}
	if ev.TimedOut {
		dst = key(dst, `"timedOut":true`)
	}
	if ev.Error != "" {
		dst = appendString(key(dst, `"error":`), ev.Error)
	}
	return append(dst, '}', '\n')
}

const hexDigits = "0123456789abcdef"

// asciiEscapes holds the escape of each ASCII byte outside htmlSafe, as encoding/json
// writes it, packed little-endian into a word so that it is written in one store.
var asciiEscapes = func() (t [utf8.RuneSelf]struct {
	word uint64
	n    uint8
}) {
	for b := range utf8.RuneSelf {
		var e string
		switch b {
		case '\\', '"':
			e = `\` + string(rune(b))
		case '\b':
			e = `\b`
		case '\f':
			e = `\f`
		case '\n':
			e = `\n`
		case '\r':
			e = `\r`
		case '\t':
			e = `\t`
		default:
			e = `\u00` + string(hexDigits[b>>4]) + string(hexDigits[b&0xf])
		}
		var w [8]byte
		copy(w[:], e)
		t[b].word, t[b].n = binary.LittleEndian.Uint64(w[:]), uint8(len(e))
	}
	return t
}()

// htmlSafe marks the ASCII bytes encoding/json copies as they are. It escapes the
// rest: '"' and '\\', control characters, and '<', '>' and '&' (its HTML escaping,
// on by default in json.Marshal).
var htmlSafe = func() (t [utf8.RuneSelf]bool) {
	for b := range utf8.RuneSelf {
		t[b] = b >= 0x20 && b != '"' && b != '\\' && b != '<' && b != '>' && b != '&'
	}
	return t
}()

// Word-at-a-time tests, after "Bit Twiddling Hacks". Each returns a word whose high
// bits are all clear exactly when none of the eight bytes of x is special. A byte
// b < 0x80 minus n sets its high bit when b < n; borrows run upwards from a byte
// that is itself special, so they never mark a word that has none.
const (
	lsb = 0x0101010101010101
	msb = 0x8080808080808080
)

// outsideASCIIText marks bytes below 0x20 or from 0x80.
func outsideASCIIText(x uint64) uint64 { return (x - lsb*0x20) | x }

// equalTo marks bytes equal to c, for words with no byte from 0x80 (others are
// marked by outsideASCIIText anyway): b^c is zero only for b == c.
func equalTo(x uint64, c byte) uint64 { return (x ^ lsb*uint64(c)) - lsb }

// load64 reads 8 bytes of s at i, little-endian; the compiler makes it one load.
func load64[S string | []byte](s S, i int) uint64 {
	s = s[i : i+8]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

// encodeUnsafe has a high bit set when some byte of x is not in htmlSafe. Setting
// bit 2 makes '"' (0x22) into '&' (0x26), and bit 1 '<' (0x3c) into '>' (0x3e), so
// one comparison finds either of a pair.
func encodeUnsafe(x uint64) uint64 {
	return (outsideASCIIText(x) | equalTo(x|lsb*0x04, '&') | equalTo(x|lsb*0x02, '>') | equalTo(x, '\\')) & msb
}

// appendString appends s as a JSON string the way encoding/json does: HTML
// characters, U+2028 and U+2029 escaped, and each byte of invalid UTF-8 replaced by
// \ufffd, so the reader gets U+FFFD for it.
func appendString[S string | []byte](dst []byte, s S) []byte {
	if n := len(dst) + len(s) + 2; n > cap(dst) {
		grown := make([]byte, len(dst), n+n/16)
		copy(grown, dst)
		dst = grown
	}
	dst = append(dst, '"')
	start, i := 0, 0
	for i < len(s) {
		if i+16 <= len(s) && encodeUnsafe(load64(s, i))|encodeUnsafe(load64(s, i+8)) == 0 {
			i += 16
			continue
		}
		if i+8 <= len(s) && encodeUnsafe(load64(s, i)) == 0 {
			i += 8
			continue
		}
		// Something in the next eight bytes needs a look: take them one at a time.
		for end := min(i+8, len(s)); i < end; {
			b := s[i]
			if b < utf8.RuneSelf {
				if htmlSafe[b] {
					i++
					continue
				}
				if start < i {
					dst = append(dst, s[start:i]...)
				}
				e := asciiEscapes[b]
				dst = binary.LittleEndian.AppendUint64(dst, e.word)[:len(dst)+int(e.n)]
				i++
				start = i
				continue
			}
			// At most four bytes: converting them from []byte needs no allocation.
			r, size := utf8.DecodeRuneInString(string(s[i:min(i+utf8.UTFMax, len(s))]))
			switch {
			case r == utf8.RuneError && size == 1:
				dst = append(append(dst, s[start:i]...), `\ufffd`...)
			case r == '\u2028' || r == '\u2029':
				dst = append(append(dst, s[start:i]...), '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			default:
				i += size
				continue
			}
			i += size
			start = i
		}
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
