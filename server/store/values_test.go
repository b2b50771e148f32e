package store

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
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

// A reason, which may quote a backend's error of any length, is stored cut to
// MaxReasonBytes, on a character boundary, on create and on update alike.
func TestReasonsAreCut(t *testing.T) {
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	for _, reason := range []string{
		strings.Repeat("é", MaxReasonBytes),        // twice the limit, two-byte characters
		strings.Repeat("x", 4<<20),                 // a plugin's 4 MiB message
		strings.Repeat("\x00\xff", MaxReasonBytes), // NUL and invalid UTF-8, replaced first
	} {
		created, err := NormalizeSandbox(now, Sandbox{ID: "sbx_1", Reason: reason})
		if err != nil {
			t.Fatal(err)
		}
		updated, err := ApplyUpdate(created, now, func(sb *Sandbox) error { sb.Reason = reason; return nil })
		if err != nil {
			t.Fatal(err)
		}
		for _, got := range []string{created.Reason, updated.Reason} {
			if len(got) > MaxReasonBytes || !utf8.ValidString(got) || !strings.HasSuffix(got, "…") || strings.ContainsRune(got, 0) {
				t.Fatalf("reason of %d bytes stored as %d bytes (valid %v): %.40q…", len(reason), len(got), utf8.ValidString(got), got)
			}
		}
	}
	if got, _ := NormalizeSandbox(now, Sandbox{ID: "sbx_1", Reason: "short"}); got.Reason != "short" {
		t.Fatalf("a short reason became %q", got.Reason)
	}
}
