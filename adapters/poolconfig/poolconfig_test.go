package poolconfig_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/different-ai/differently/adapters/poolconfig"
	"github.com/different-ai/differently/api"
)

func TestReader(t *testing.T) {
	r := poolconfig.Read("kind", map[string]any{
		"name": "x", "on": true, "n": json.Number("3"), "f": 2.5, "list": []any{"a", "b"}, "empty": []any{},
	})
	if r.String("name", "") != "x" || !r.Bool("on", false) || r.Int("n", 0) != 3 || r.Float("f", 0) != 2.5 {
		t.Fatal("values not read")
	}
	if got := r.Strings("list"); strings.Join(got, ",") != "a,b" {
		t.Fatalf("list %v", got)
	}
	if got := r.Strings("empty"); got == nil || len(got) != 0 {
		t.Fatalf("an explicit [] must stay distinct from unset: %#v", got)
	}
	if r.Strings("unset") != nil || r.Int("missing", 7) != 7 {
		t.Fatal("defaults not used")
	}
	if err := r.Err(); err != nil {
		t.Fatal(err)
	}
}

func TestReaderErrorsNameTheKey(t *testing.T) {
	tests := []struct {
		cfg  map[string]any
		read func(*poolconfig.Reader)
		key  string
		want string
	}{
		{map[string]any{"typo": 1}, func(*poolconfig.Reader) {}, "typo", "unknown key"},
		{map[string]any{"n": 2.5}, func(r *poolconfig.Reader) { r.Int("n", 0) }, "n", "not an integer"},
		{map[string]any{"n": -1}, func(r *poolconfig.Reader) { r.Int("n", 0) }, "n", "negative"},
		{map[string]any{"s": 3}, func(r *poolconfig.Reader) { r.String("s", "") }, "s", "want a string"},
		{map[string]any{"b": "yes"}, func(r *poolconfig.Reader) { r.Bool("b", false) }, "b", "want true or false"},
		{map[string]any{"l": []any{"a", 1}}, func(r *poolconfig.Reader) { r.Strings("l") }, "l", "item 1"},
		{map[string]any{"u": "ftp://x"}, func(r *poolconfig.Reader) { r.String("u", ""); r.Check("u", errors.New("not http")) }, "u", "not http"},
		// Several problems: the first in key order is reported.
		{map[string]any{"b": 1, "a": "x"}, func(r *poolconfig.Reader) { r.Int("a", 0); r.Int("b", 0) }, "a", "want an integer"},
	}
	for _, tt := range tests {
		r := poolconfig.Read("kind", tt.cfg)
		tt.read(r)
		err := r.Err()
		e := api.AsError(err)
		if e == nil || e.Code != api.CodeInvalidRequest || e.Details["key"] != tt.key || !strings.Contains(e.Message, tt.want) {
			t.Errorf("%v: got %v, want invalid_request on %q mentioning %q", tt.cfg, err, tt.key, tt.want)
		}
	}
}

// TestURL: an endpoint is an http or https URL with a host and nothing that could not
// be meant (credentials, a query, a fragment); a refused one is described without
// its credentials.
func TestURL(t *testing.T) {
	for in, want := range map[string]string{
		"https://api.example/v1":   "https://api.example/v1",
		" http://127.0.0.1:8080/ ": "http://127.0.0.1:8080/",
		"http://[::1]:80":          "http://[::1]:80",
	} {
		if got, err := poolconfig.ToURL(in); err != nil || got != want {
			t.Errorf("ToURL(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for in, want := range map[string]string{
		"":                          "empty",
		"ftp://files.example":       "must be an http or https URL",
		"file:///etc/passwd":        "must be an http or https URL",
		"api.example":               "must be an http or https URL",
		"http://":                   "no host",
		"http://:80":                "no host",
		"https://u:pw@api.example/": "must not hold credentials",
		"https://api.example/?k=1":  "query or fragment",
		"https://api.example/#x":    "query or fragment",
		"http://a b/":               "not a URL",
	} {
		_, err := poolconfig.ToURL(in)
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "pw") {
			t.Errorf("ToURL(%q) = %v, want an error mentioning %q", in, err, want)
		}
	}
	if _, err := poolconfig.ToURL(8080); err == nil || !strings.Contains(err.Error(), "want a string") {
		t.Errorf("a number: %v", err)
	}
}
