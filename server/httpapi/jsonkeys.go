package httpapi

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"sync"

	"github.com/different-ai/differently/server/apierr"
)

// encoding/json matches an object's key to a struct field ignoring case when no
// field has exactly that name, so {"Template": "x"} would set template. The API's
// document says otherwise (additionalProperties: false, names as written), and a
// client relying on the looser match would break against any other implementation
// of it. exactKeys walks a body that already decoded into a value of type t and
// refuses the first key that matched a field only by ignoring case.

// exactKeys returns an invalid_request error for the first object key of data that
// names a field of t only when case is ignored. data must be valid JSON.
func exactKeys(data []byte, t reflect.Type) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	return walkKeys(dec, t, "")
}

var unmarshalerType = reflect.TypeFor[json.Unmarshaler]()

// walkKeys reads one value from dec, checking it against t; a nil t (an interface, a
// type with its own UnmarshalJSON) is skipped unread.
func walkKeys(dec *json.Decoder, t reflect.Type, path string) error {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t != nil && (t.Implements(unmarshalerType) || reflect.PointerTo(t).Implements(unmarshalerType)) {
		t = nil
	}
	switch {
	case t == nil, t.Kind() != reflect.Struct && t.Kind() != reflect.Map &&
		t.Kind() != reflect.Slice && t.Kind() != reflect.Array:
		// Nothing below can name a field: skip the value whole, without recursion.
		var skip json.RawMessage
		return dec.Decode(&skip)
	}
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	switch tok {
	case json.Delim('{'):
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return err
			}
			key, _ := kt.(string)
			var sub reflect.Type
			switch t.Kind() {
			case reflect.Struct:
				fields := jsonFields(t)
				if ft, ok := fields[key]; ok {
					sub = ft
				} else {
					for name := range fields {
						if strings.EqualFold(name, key) {
							return apierr.Invalid("unknown field %q: field names are case-sensitive (did you mean %q?)",
								printable(path+key), path+name)
						}
					}
				}
			case reflect.Map:
				sub = t.Elem()
			}
			if err := walkKeys(dec, sub, path+key+"."); err != nil {
				return err
			}
		}
	case json.Delim('['):
		var elem reflect.Type
		if t.Kind() == reflect.Slice || t.Kind() == reflect.Array {
			elem = t.Elem()
		}
		for dec.More() {
			if err := walkKeys(dec, elem, path); err != nil {
				return err
			}
		}
	default:
		return nil // a scalar (or null) where a container could be
	}
	_, err = dec.Token() // the closing delimiter
	return err
}

var fieldCache sync.Map // reflect.Type → map[string]reflect.Type

// jsonFields is the JSON names of a struct type's fields, as encoding/json sees
// them: a tag's name or the field's own, "-" left out, untagged embedded structs
// flattened into their parent (an outer name winning over an embedded one).
func jsonFields(t reflect.Type) map[string]reflect.Type {
	if f, ok := fieldCache.Load(t); ok {
		return f.(map[string]reflect.Type)
	}
	fields := map[string]reflect.Type{}
	var embedded []reflect.Type
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			et := f.Type
			if et.Kind() == reflect.Pointer {
				et = et.Elem()
			}
			if et.Kind() == reflect.Struct {
				embedded = append(embedded, et)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		fields[name] = f.Type
	}
	for _, et := range embedded {
		for name, ft := range jsonFields(et) {
			if _, ok := fields[name]; !ok {
				fields[name] = ft
			}
		}
	}
	fieldCache.Store(t, fields)
	return fields
}
