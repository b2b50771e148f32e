// Package redact removes secrets from text a backend, a driver or a proxy sent back:
// error messages, instance messages, pool errors. Such text may quote a secret
// whole, but also a piece of it (a backend that echoes a key minus its last four
// characters, a message cut short) or an encoding of it (base64 in a Basic
// authorization header, hex, a URL's percent-escapes, a JSON string's escapes).
//
// A Set removes, for each secret of at least MinPartial bytes:
//   - the secret and each of its encodings, whole;
//   - every run of text made of pieces of MinPartial or more characters of the
//     secret or of one of its encodings.
//
// A shorter secret is removed only as itself (and as a JSON string writes it), and
// only where it stands apart from a longer word: not where it is joined by a letter,
// a digit or an underscore to a side of it that is one. Its pieces, its encodings
// ("1" is "31" in hex, "MQ" in base64) and its occurrences inside words ("dev" in
// "development", "1" in "12") would take ordinary text with them, and a backend that
// quotes a secret sets it off.
//
// Percent-escapes are matched whichever case their hex digits are in (%2f, %2F).
//
// The encodings are standard and URL-safe base64, with and without padding, of the
// secret from each of its first three bytes (base64 of a text that holds the secret
// encodes it at one of three alignments), lower- and upper-case hex, query and path
// percent-escaping, and the JSON escapes of Go's encoder, of encoders that leave <,
// > and & alone, and of those that escape the solidus.
package redact

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"net/url"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Marker replaces what was removed.
const Marker = "[redacted]"

// MinPartial is the length of the shortest piece of a secret (or of an encoding of
// one) that is removed on its own; pieces are matched in windows of this size.
const MinPartial = 8 // window reads exactly this many bytes

// Set is a set of secrets to remove. The zero value removes nothing and is ready for
// Add; a Set is not safe for concurrent Add, and safe for concurrent use otherwise.
type Set struct {
	// whole holds every secret and encoding, longest first.
	whole []string
	// bounded holds the secrets shorter than MinPartial and their JSON forms,
	// longest first: removed only where they stand apart from a word.
	bounded []string
	// grams holds every MinPartial-byte window of the secrets of at least
	// MinPartial bytes and of their encodings, as the 8 bytes read as one number
	// (quicker to look up than a string).
	grams map[uint64]struct{}
	// lead has a bit set for the first two bytes of every window in grams: most
	// positions of a text fail this test, and skip the map.
	lead *[1 << 16 / 64]uint64
}

// New returns a Set of secrets; empty ones are ignored.
func New(secrets ...string) *Set {
	s := &Set{}
	for _, secret := range secrets {
		s.Add(secret)
	}
	return s
}

// String returns text without any of secrets: New(secrets...).String(text).
func String(text string, secrets ...string) string { return New(secrets...).String(text) }

// Empty reports whether the Set removes nothing.
func (s *Set) Empty() bool { return s == nil || len(s.whole) == 0 && len(s.bounded) == 0 }

// Add registers one more secret; "" is ignored.
func (s *Set) Add(secret string) {
	if secret == "" {
		return
	}
	longestFirst := func(a, b string) int { return len(b) - len(a) }
	if len(secret) < MinPartial {
		for _, f := range jsonForms(secret) {
			if f != "" && !slices.Contains(s.bounded, f) {
				s.bounded = append(s.bounded, f)
			}
		}
		slices.SortStableFunc(s.bounded, longestFirst)
		return
	}
	forms := wholeForms(secret)
	for _, f := range forms {
		if f != "" && !slices.Contains(s.whole, f) {
			s.whole = append(s.whole, f)
		}
	}
	// Longer forms first, so that TrimPartial tries the longest piece first.
	slices.SortStableFunc(s.whole, longestFirst)
	if s.grams == nil {
		s.grams = map[uint64]struct{}{}
		s.lead = new([1 << 16 / 64]uint64)
	}
	for _, f := range append(forms, shiftedBase64(secret)...) {
		for i := 0; i+MinPartial <= len(f); i++ {
			s.grams[window(f, i)] = struct{}{}
			pair := uint16(f[i]) | uint16(f[i+1])<<8
			s.lead[pair/64] |= 1 << (pair % 64)
		}
	}
}

// wholeForms is secret and its encodings.
func wholeForms(secret string) []string {
	b := []byte(secret)
	forms := []string{secret, url.QueryEscape(secret), url.PathEscape(secret),
		hex.EncodeToString(b), strings.ToUpper(hex.EncodeToString(b))}
	for _, enc := range encodings {
		forms = append(forms, enc.EncodeToString(b))
	}
	return append(forms, jsonForms(secret)[1:]...)
}

// jsonForms is secret and how JSON strings write it: as Go does (<, > and &
// escaped), as other encoders do, and with the solidus escaped as some do.
func jsonForms(secret string) []string {
	forms := []string{secret}
	// JSON as Go writes it (<, > and & escaped), as other encoders write it, and with
	// the solidus escaped as some do.
	var plain bytes.Buffer
	enc := json.NewEncoder(&plain)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(secret)
	goJSON, _ := json.Marshal(secret)
	for _, j := range []string{string(goJSON), strings.TrimSpace(plain.String())} {
		j = strings.TrimSuffix(strings.TrimPrefix(j, `"`), `"`)
		forms = append(forms, j, strings.ReplaceAll(j, "/", `\/`))
	}
	return forms
}

var encodings = []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding}

// shiftedBase64 is base64 of secret from its second and third byte on: how the secret
// looks inside the base64 of a longer text ("user:" + secret) that holds it at
// another alignment. The first character of each depends on the bytes before the
// secret and is left out.
func shiftedBase64(secret string) []string {
	var out []string
	for shift := 1; shift <= 2 && shift < len(secret); shift++ {
		for _, enc := range []*base64.Encoding{base64.RawStdEncoding, base64.RawURLEncoding} {
			out = append(out, enc.EncodeToString([]byte(secret[shift:])))
		}
	}
	return out
}

// window is the MinPartial bytes of s from i on, as one number.
func window(s string, i int) uint64 {
	_ = s[i+MinPartial-1]
	return uint64(s[i]) | uint64(s[i+1])<<8 | uint64(s[i+2])<<16 | uint64(s[i+3])<<24 |
		uint64(s[i+4])<<32 | uint64(s[i+5])<<40 | uint64(s[i+6])<<48 | uint64(s[i+7])<<56
}

// String returns text with every form and piece of the secrets replaced by Marker;
// overlapping or adjacent matches become one Marker. A replaced run never ends or
// starts inside a UTF-8 sequence.
func (s *Set) String(text string) string {
	if s.Empty() || text == "" {
		return text
	}
	var cover []bool
	mark := func(from, to int) {
		if cover == nil {
			cover = make([]bool, len(text))
		}
		for i := from; i < to; i++ {
			cover[i] = true
		}
	}
	s.find(text, mark)
	// The encodings escape in upper case (%2F); a text that escapes in lower case
	// is matched again with its escapes upper-cased, which keeps every offset.
	if upper, ok := upperEscapes(text); ok {
		s.find(upper, mark)
	}
	for _, f := range s.bounded {
		for from := 0; from < len(text); {
			i := strings.Index(text[from:], f)
			if i < 0 {
				break
			}
			if at := from + i; apart(text, at, at+len(f)) {
				mark(at, at+len(f))
			}
			from += i + 1
		}
	}
	if cover == nil {
		return text
	}
	return s.replace(text, cover)
}

// find marks in text every whole form and every window of the secrets of at least
// MinPartial bytes.
func (s *Set) find(text string, mark func(from, to int)) {
	for _, f := range s.whole {
		for from := 0; from < len(text); {
			i := strings.Index(text[from:], f)
			if i < 0 {
				break
			}
			mark(from+i, from+i+len(f))
			from += i + 1
		}
	}
	if len(s.grams) > 0 {
		for i := 0; i+MinPartial <= len(text); i++ {
			if pair := uint16(text[i]) | uint16(text[i+1])<<8; s.lead[pair/64]&(1<<(pair%64)) == 0 {
				continue
			}
			if _, ok := s.grams[window(text, i)]; ok {
				mark(i, i+MinPartial)
			}
		}
	}
}

// upperEscapes is text with the hex digits of its percent-escapes in upper case, and
// whether any was in lower case.
func upperEscapes(text string) (string, bool) {
	var b []byte
	for i := strings.IndexByte(text, '%'); i >= 0 && i+2 < len(text); {
		if isHex(text[i+1]) && isHex(text[i+2]) {
			for _, k := range []int{i + 1, i + 2} {
				if c := text[k]; 'a' <= c && c <= 'f' {
					if b == nil {
						b = []byte(text)
					}
					b[k] = c - 'a' + 'A'
				}
			}
		}
		next := strings.IndexByte(text[i+1:], '%')
		if next < 0 {
			break
		}
		i += 1 + next
	}
	if b == nil {
		return text, false
	}
	return string(b), true
}

func isHex(c byte) bool { return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F' }

// apart reports whether text[from:to] is not joined to a word: at each end, the
// match or its neighbour is not a letter, digit or underscore. A match that begins
// or ends inside a UTF-8 sequence is taken as apart: it is no word's part, and is
// removed with the character it cuts.
func apart(text string, from, to int) bool {
	if !utf8.RuneStart(text[from]) || to < len(text) && !utf8.RuneStart(text[to]) {
		return true
	}
	if from > 0 {
		before, _ := utf8.DecodeLastRuneInString(text[:from])
		first, _ := utf8.DecodeRuneInString(text[from:])
		if wordRune(before) && wordRune(first) {
			return false
		}
	}
	if to < len(text) {
		last, _ := utf8.DecodeLastRuneInString(text[:to])
		after, _ := utf8.DecodeRuneInString(text[to:])
		if wordRune(last) && wordRune(after) {
			return false
		}
	}
	return true
}

func wordRune(r rune) bool { return r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) }

// replace writes text with each covered run replaced by one Marker.
func (s *Set) replace(text string, cover []bool) string {
	// Widen each run to whole characters: half a character left behind would be
	// invalid UTF-8 in a message.
	for i := 0; i < len(text); i++ {
		if !cover[i] {
			continue
		}
		for k := i; k > 0 && !utf8.RuneStart(text[k]) && !cover[k-1]; k-- {
			cover[k-1] = true
		}
	}
	for i := len(text) - 1; i > 0; i-- {
		if cover[i-1] && !cover[i] && !utf8.RuneStart(text[i]) {
			for k := i; k < len(text) && !utf8.RuneStart(text[k]); k++ {
				cover[k] = true
			}
		}
	}
	var b strings.Builder
	for i := 0; i < len(text); {
		if !cover[i] {
			b.WriteByte(text[i])
			i++
			continue
		}
		for i < len(text) && cover[i] {
			i++
		}
		b.WriteString(Marker)
	}
	return b.String()
}

// TrimPartial returns text without a tail of at least minLen bytes that begins a
// secret in any of its whole forms: what is left of one where the text was cut short
// inside it, which String leaves when the piece is shorter than MinPartial. Trim a
// text that was cut before passing it to String.
func (s *Set) TrimPartial(text string, minLen int) string {
	if s.Empty() {
		return text
	}
	minLen = max(minLen, 1)
	// Compared with its escapes in upper case, as the forms write them.
	cmp, _ := upperEscapes(text)
	for _, f := range slices.Concat(s.whole, s.bounded) {
		for n := min(len(f)-1, len(cmp)); n >= minLen; n-- {
			if strings.HasSuffix(cmp, f[:n]) {
				cmp = cmp[:len(cmp)-n]
				break
			}
		}
	}
	return text[:len(cmp)]
}
