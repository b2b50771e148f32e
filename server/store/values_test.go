package store

import (
	"encoding/json"
	"reflect"
	"testing"
)

// UnmarshalJSON's shortcut for empty values decodes exactly as encoding/json does,
// whatever the target held before.
func TestUnmarshalJSONEmptyValues(t *testing.T) {
	targets := []func() any{
		func() any { return new(map[string]string) },
		func() any { m := map[string]string{"old": "x"}; return &m },
		func() any { return new([]string) },
		func() any { s := []string{"old"}; return &s },
		func() any { return new(Placement) },
		func() any { return &Placement{AllowedPools: []string{"old"}} },
	}
	for _, in := range []string{"null", "{}", "[]", `{"a":"b"}`, `["a"]`, `{"allowedPools":["p"]}`} {
		for _, mk := range targets {
			got, want := mk(), mk()
			gotErr := UnmarshalJSON([]byte(in), got)
			wantErr := json.Unmarshal([]byte(in), want)
			if (gotErr != nil) != (wantErr != nil) || !reflect.DeepEqual(got, want) {
				t.Errorf("%s into %T: got %#v (%v), encoding/json %#v (%v)", in, want, got, gotErr, want, wantErr)
			}
		}
	}
}
