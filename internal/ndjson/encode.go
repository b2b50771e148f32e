package ndjson

import (
	"bytes"
	"encoding/binary"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/different-ai/differently/api"
)

// AppendEvent appends ev to dst as one NDJSON line: exactly the bytes a json.Encoder
// with SetEscapeHTML(false) writes for it, newline included. That is json.Marshal's
// output except that '<', '>' and '&' go as they are instead of as \u003c, \u003e
// and \u0026, which means the same to every JSON reader; the HTML escaping only
// matters for JSON embedded in HTML, which a stream served as application/x-ndjson
// with nosniff is not. It is the writer's hot path, so it avoids reflection and
// copies runs of bytes that need no escaping in one go.
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
	if ev.Code != "" {
		dst = appendString(key(dst, `"code":`), string(ev.Code))
	}
	return append(dst, '}', '\n')
}

const hexDigits = "0123456789abcdef"

// asciiEscapes holds the escape of each ASCII byte a JSON string cannot carry as it
// is (control characters, '"', '\\'), as encoding/json writes it, packed
// little-endian into a word so that it is written in one store.
var asciiEscapes = func() (t [0x60]struct {
	word uint64
	n    uint8
}) {
	for b := range len(t) {
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

// appendString appends s as a JSON string the way encoding/json does without HTML
// escaping: U+2028 and U+2029 escaped, and each byte of invalid UTF-8 replaced by
// \ufffd, so the reader gets U+FFFD for it. The bytes that need a look are found
// with IndexByte ('"' and '\\', fast assembly on most platforms) and a word test
// (control characters and non-ASCII), so printable ASCII costs little more than a copy.
func appendString[S string | []byte](dst []byte, s S) []byte {
	if n := len(dst) + len(s) + 2; n > cap(dst) {
		grown := make([]byte, len(dst), n+n/16)
		copy(grown, dst)
		dst = grown
	}
	dst = append(dst, '"')
	start, i := 0, 0 // s[start:i] is to be copied as it is
	quote, backslash := -1, -1
	for i < len(s) {
		if quote < i {
			quote = indexFrom(s, i, '"')
		}
		if backslash < i {
			backslash = indexFrom(s, i, '\\')
		}
		if i = skipASCIIText(s, i, min(quote, backslash)); i == len(s) {
			break
		}
		if s[i] < utf8.RuneSelf {
			// '"', '\\' or a control character: escape it and any that follow.
			if start < i {
				dst = append(dst, s[start:i]...)
			}
			for ; i < len(s) && (s[i] < 0x20 || s[i] == '"' || s[i] == '\\'); i++ {
				e := asciiEscapes[s[i]]
				dst = binary.LittleEndian.AppendUint64(dst, e.word)[:len(dst)+int(e.n)]
			}
			start = i
			continue
		}
		// Non-ASCII: take the whole run of it here.
		for i < len(s) && s[i] >= utf8.RuneSelf {
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

// indexFrom is the index of the first c in s at or after i, or len(s).
func indexFrom[S string | []byte](s S, i int, c byte) int {
	var j int
	switch v := any(s[i:]).(type) { // no allocation: the value does not escape
	case string:
		j = strings.IndexByte(v, c)
	case []byte:
		j = bytes.IndexByte(v, c)
	}
	if j < 0 {
		return len(s)
	}
	return i + j
}

// skipASCIIText returns the index of the first byte of s[i:end] below 0x20 or from
// 0x80, or end.
func skipASCIIText[S string | []byte](s S, i, end int) int {
	for i+16 <= end && (outsideASCIIText(load64(s, i))|outsideASCIIText(load64(s, i+8)))&msb == 0 {
		i += 16
	}
	for i+8 <= end && outsideASCIIText(load64(s, i))&msb == 0 {
		i += 8
	}
	for i < end && s[i] >= 0x20 && s[i] < utf8.RuneSelf {
		i++
	}
	return i
}
