// Package safeurl describes a configured URL in an error or a log line without the
// credentials it may carry. A URL refused because it does not parse, or because it
// has the wrong scheme, is often refused for the very part (a password with a stray
// %, user information without a scheme) that must not be quoted back.
package safeurl

import (
	"errors"
	"net/url"
	"strings"
)

// Redacted stands for what Describe leaves out.
const Redacted = "[redacted]"

// Describe returns raw, which need not parse, with everything between the scheme's
// "//" (or the start) and the last "@" replaced, and any query or fragment after
// that replaced too: user information, a password holding "/", "?" or "#"
// included. An "@" in a path costs the host its mention; nothing secret is quoted.
func Describe(raw string) string {
	start := 0
	if i := strings.Index(raw, "://"); i >= 0 {
		start = i + len("://")
	}
	out, rest := raw, start
	if at := strings.LastIndexByte(raw[start:], '@'); at >= 0 {
		out = raw[:start] + Redacted + raw[start+at:]
		rest = start + len(Redacted)
	}
	if i := strings.IndexAny(out[rest:], "?#"); i >= 0 {
		out = out[:rest+i+1] + Redacted
	}
	return out
}

// errNotURL stands for an error of url.Parse, which quotes the URL, or parts of it
// (an "invalid port" holding a password's first half), whole.
var errNotURL = errors.New("it does not parse as a URL")

// Reason is what is wrong in an error of url.Parse, without any part of the URL.
func Reason(err error) error {
	if _, ok := errors.AsType[*url.Error](err); ok {
		return errNotURL
	}
	return err
}
