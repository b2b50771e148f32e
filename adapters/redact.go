package adapters

import (
	"bytes"
	"encoding/json"
	"net/url"
	"slices"
	"strings"

	"github.com/different-ai/differently/api"
)

// Redacted replaces a credential in text a backend sent back.
const Redacted = "[redacted]"

// Redactor removes credentials from text that came back from a backend: error
// messages, error details, instance messages. A backend that echoes a request may
// quote a credential as sent, JSON-escaped or URL-escaped; every form is removed.
// The zero value removes nothing; it is not safe for concurrent Add.
type Redactor struct {
	forms []string
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
func (r *Redactor) Add(secret string) {
	if secret == "" {
		return
	}
	forms := []string{secret, url.QueryEscape(secret), url.PathEscape(secret)}
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
	for _, f := range forms {
		if !slices.Contains(r.forms, f) {
			r.forms = append(r.forms, f)
		}
	}
	// Longer forms first, so that a secret containing another is replaced whole.
	slices.SortStableFunc(r.forms, func(a, b string) int { return len(b) - len(a) })
}

// String returns s without any form of the secrets.
func (r *Redactor) String(s string) string {
	if r == nil {
		return s
	}
	for _, f := range r.forms {
		s = strings.ReplaceAll(s, f, Redacted)
	}
	return s
}

// TrimPartial returns s without a tail of at least minLen bytes that begins a secret
// (in any form String removes): what is left of one where s was cut short inside
// it, which String, matching whole secrets only, would leave in place. Trim a text
// that was cut before passing it to String.
func (r *Redactor) TrimPartial(s string, minLen int) string {
	if r == nil {
		return s
	}
	minLen = max(minLen, 1)
	for _, f := range r.forms {
		for n := min(len(f)-1, len(s)); n >= minLen; n-- {
			if strings.HasSuffix(s, f[:n]) {
				s = s[:len(s)-n]
				break
			}
		}
	}
	return s
}

// Error returns e with the secrets removed from its message and from the strings of
// its details (nested maps and lists included); e itself is returned when it holds
// none.
func (r *Redactor) Error(e *api.Error) *api.Error {
	if r == nil || e == nil || len(r.forms) == 0 {
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
