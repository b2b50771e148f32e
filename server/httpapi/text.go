package httpapi

import (
	"net/http"
	"net/url"
	"reflect"
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
// invalid UTF-8.
func (s *Server) checkText(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if badText(r.URL.Path) {
			s.writeError(w, r, api.Errorf(api.CodeInvalidRequest, "the request path holds a NUL byte or invalid UTF-8"))
			return
		}
		// A query that does not parse is left to the parameter binding, which says
		// which parameter is wrong.
		if q, err := url.ParseQuery(r.URL.RawQuery); err == nil {
			for k, vs := range q {
				bad := badText(k)
				for _, v := range vs {
					bad = bad || badText(v)
				}
				if bad {
					s.writeError(w, r, api.Errorf(api.CodeInvalidRequest, "query parameter %q holds a NUL byte or invalid UTF-8", printable(k)))
					return
				}
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
	return nulIn(reflect.ValueOf(v), "")
}

func nulIn(v reflect.Value, path string) string {
	switch v.Kind() {
	case reflect.String:
		if strings.IndexByte(v.String(), 0) >= 0 {
			return orRoot(path)
		}
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			return nulIn(v.Elem(), path)
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			if p := nulIn(v.Index(i), path+"["+strconv.Itoa(i)+"]"); p != "" {
				return p
			}
		}
	case reflect.Map:
		it := v.MapRange()
		for it.Next() {
			k := it.Key()
			if k.Kind() == reflect.String && strings.IndexByte(k.String(), 0) >= 0 {
				return orRoot(path) + " (a key)"
			}
			if p := nulIn(it.Value(), path+"."+printable(k.String())); p != "" {
				return p
			}
		}
	case reflect.Struct:
		t := v.Type()
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "" {
				name = f.Name
			}
			if p := nulIn(v.Field(i), path+"."+name); p != "" {
				return p
			}
		}
	}
	return ""
}

func orRoot(path string) string {
	if path == "" {
		return "the body"
	}
	return strings.TrimPrefix(path, ".")
}
