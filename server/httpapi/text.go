package httpapi

import (
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/different-ai/differently/api"
)

// Text the API takes must be storable: no NUL character and valid UTF-8.
// PostgreSQL's text and jsonb refuse both, SQLite keeps them, and no ID, name, label
// or filter of the API holds one. So a request carrying one is refused here, with the
// same 400 on either store, instead of reaching the store and coming back as a 500
// on one of them.

// badText reports whether s cannot be stored as text.
func badText(s string) bool {
	return strings.IndexByte(s, 0) >= 0 || !utf8.ValidString(s)
}

// checkText refuses a request whose path or query, decoded, holds a NUL byte or
// invalid UTF-8. The files routes' path parameter is a file name, which Linux lets
// be any bytes but NUL, and is stored nowhere: only a NUL refuses it.
func (s *Server) checkText(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if badText(r.URL.Path) {
			s.writeError(w, r, api.Errorf(api.CodeInvalidRequest, "the request path holds a NUL byte or invalid UTF-8"))
			return
		}
		// The pairs that parse are checked even when some do not: the parameter
		// binding, like url.URL.Query, drops only the pairs it cannot parse.
		q, _ := url.ParseQuery(r.URL.RawQuery)
		for k, vs := range q {
			bad := badText(k)
			for _, v := range vs {
				if k == "path" {
					bad = bad || strings.IndexByte(v, 0) >= 0
				} else {
					bad = bad || badText(v)
				}
			}
			if bad {
				s.writeError(w, r, api.Errorf(api.CodeInvalidRequest, "query parameter %q holds a NUL byte or invalid UTF-8", printable(k)))
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// printable is s with NUL bytes and invalid UTF-8 replaced, fit to quote in an error.
func printable(s string) string {
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
}

// nulField returns the JSON path of the first string in v (a decoded request body)
// that holds a NUL character, the \u0000 escape, or "" when none does. Invalid UTF-8
// cannot occur: encoding/json replaces it while decoding.
func nulField(v any) string {
	path, found := nulIn(reflect.ValueOf(v))
	if !found {
		return ""
	}
	if len(path) == 0 {
		return "the body"
	}
	slices.Reverse(path)
	return strings.TrimPrefix(strings.Join(path, ""), ".")
}

// nulIn reports whether v holds a NUL character, and where: the path's elements
// innermost first, collected on the way back up only once one is found, so that a
// deeply nested body costs no string per level.
func nulIn(v reflect.Value) (path []string, found bool) {
	switch v.Kind() {
	case reflect.String:
		return nil, strings.IndexByte(v.String(), 0) >= 0
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			return nulIn(v.Elem())
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			if p, ok := nulIn(v.Index(i)); ok {
				return append(p, "["+strconv.Itoa(i)+"]"), true
			}
		}
	case reflect.Map:
		it := v.MapRange()
		for it.Next() {
			k := it.Key()
			if k.Kind() == reflect.String && strings.IndexByte(k.String(), 0) >= 0 {
				return []string{" (a key)"}, true
			}
			if p, ok := nulIn(it.Value()); ok {
				return append(p, "."+printable(k.String())), true
			}
		}
	case reflect.Struct:
		t := v.Type()
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			if p, ok := nulIn(v.Field(i)); ok {
				name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
				if name == "" {
					name = f.Name
				}
				return append(p, "."+name), true
			}
		}
	}
	return nil, false
}
