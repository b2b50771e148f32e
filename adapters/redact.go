package adapters

import (
	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/internal/redact"
)

// Redacted replaces a credential in text a backend sent back.
const Redacted = redact.Marker

// Redactor removes credentials from text that came back from a backend: error
// messages, error details, instance messages. A backend that echoes a request may
// quote a credential whole, in pieces (a prefix, a tail) or encoded (base64, hex,
// JSON- or URL-escaped); internal/redact says which forms are removed. The zero
// value removes nothing; it is not safe for concurrent Add.
type Redactor struct {
	set redact.Set
}

// NewRedactor returns a Redactor for secrets; empty ones are ignored.
func NewRedactor(secrets ...string) *Redactor {
	r := &Redactor{}
	for _, s := range secrets {
		r.Add(s)
	}
	return r
}

// Add registers one more secret.
func (r *Redactor) Add(secret string) { r.set.Add(secret) }

// String returns s without any form of the secrets.
func (r *Redactor) String(s string) string {
	if r == nil {
		return s
	}
	return r.set.String(s)
}

// TrimPartial returns s without a tail of at least minLen bytes that begins a secret
// (in any of its whole forms): what is left of one where s was cut short inside it,
// which String leaves when the piece is too short to be matched on its own. Trim a
// text that was cut before passing it to String.
func (r *Redactor) TrimPartial(s string, minLen int) string {
	if r == nil {
		return s
	}
	return r.set.TrimPartial(s, minLen)
}

// Error returns e with the secrets removed from its message and from the strings of
// its details (nested maps and lists included); e itself is returned when it holds
// none.
func (r *Redactor) Error(e *api.Error) *api.Error {
	if r == nil || e == nil || r.set.Empty() {
		return e
	}
	msg := r.String(e.Message)
	details, changed := r.value(e.Details)
	if msg == e.Message && !changed {
		return e
	}
	out := *e
	out.Message = msg
	if changed {
		out.Details, _ = details.(map[string]any)
	}
	return &out
}

// value returns v with the secrets removed from its strings, and whether any were.
func (r *Redactor) value(v any) (any, bool) {
	switch v := v.(type) {
	case string:
		s := r.String(v)
		return s, s != v
	case []string:
		out, changed := make([]string, len(v)), false
		for i, s := range v {
			out[i] = r.String(s)
			changed = changed || out[i] != s
		}
		return out, changed
	case []any:
		out, changed := make([]any, len(v)), false
		for i, x := range v {
			var c bool
			out[i], c = r.value(x)
			changed = changed || c
		}
		return out, changed
	case map[string]any:
		if v == nil {
			return v, false
		}
		out, changed := make(map[string]any, len(v)), false
		for k, x := range v {
			var c bool
			kk := r.String(k)
			out[kk], c = r.value(x)
			changed = changed || c || kk != k
		}
		return out, changed
	}
	return v, false
}
