package store

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/different-ai/differently/api"
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

func TestCheckCredentialsEnv(t *testing.T) {
	for _, c := range []struct {
		name string
		ok   bool
	}{
		{"", true},
		{"LAB_ADAPTER_TOKEN", true},
		{"_x9", true},
		{"DIFFERENTLYTOKEN", true},
		{"1TOKEN", false},
		{"A-B", false},
		{"A B", false},
		{"DIFFERENTLY_DATABASE_URL", false},
		{"DIFFERENTLY_ADAPTER_TOKEN", false},
		{"differently_database_url", false},
		{"PGPASSWORD", false},
		{"pgpassfile", false},
		{"GPU_POOL_KEY", true},
	} {
		err := CheckCredentialsEnv(c.name)
		if (err == nil) != c.ok {
			t.Errorf("CheckCredentialsEnv(%q) = %v, want ok %v", c.name, err, c.ok)
		}
		if err != nil && api.AsError(err).Code != api.CodeInvalidRequest {
			t.Errorf("CheckCredentialsEnv(%q): code %s", c.name, api.AsError(err).Code)
		}
	}
}
