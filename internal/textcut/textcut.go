// Package textcut shortens text to a number of bytes without cutting a character in
// two, so that what is kept stays valid UTF-8 where the whole was.
package textcut

import "unicode/utf8"

// Prefix is the longest prefix of s of at most n bytes that does not end inside a
// character: s itself when it fits.
func Prefix(s string, n int) string {
	if len(s) <= n {
		return s
	}
	n = max(n, 0)
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
