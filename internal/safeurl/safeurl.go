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

// Describe returns raw, which need not parse, with any user information replaced
// (everything in the authority up to its last "@") and any query or fragment
// replaced, since either may hold a token.
func Describe(raw string) string {
	start := 0
	if i := strings.Index(raw, "://"); i >= 0 {
		start = i + len("://")
	}
	end := len(raw)
	if i := strings.IndexAny(raw[start:], "/?#"); i >= 0 {
		end = start + i
	}
	out := raw
	if at := strings.LastIndexByte(raw[start:end], '@'); at >= 0 {
		out = raw[:start] + Redacted + raw[start+at:]
		end += len(Redacted) - at
	}
	if i := strings.IndexAny(out[end:], "?#"); i >= 0 {
		out = out[:end+i+1] + Redacted
	}
	return out
}

// Reason is what is wrong in an error of url.Parse, without the URL that
// *url.Error quotes whole.
func Reason(err error) error {
	if ue, ok := errors.AsType[*url.Error](err); ok {
		return ue.Err
	}
	return err
}
