package adapters_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/api"
)

func TestRedactor(t *testing.T) {
	const secret = "s3cr/t+<&>"
	r := adapters.NewRedactor("", secret)
	for _, in := range []string{
		"key " + secret,
		`{"key":"s3cr/t+\u003c\u0026\u003e"}`, // Go's JSON
		`{"key":"s3cr\/t+<&>"}`,               // an escaped solidus
		"?key=s3cr%2Ft%2B%3C%26%3E",           // query-escaped
		"/keys/s3cr%2Ft+%3C&%3E",              // path-escaped
	} {
		if got := r.String(in); strings.Contains(got, "s3cr") || !strings.Contains(got, adapters.Redacted) {
			t.Errorf("String(%q) = %q", in, got)
		}
	}

	clean := api.Errorf(api.CodeNotFound, "nothing here").WithDetail("n", 1)
	if r.Error(clean) != clean {
		t.Error("an error without a secret was copied")
	}
	e := api.Errorf(api.CodeProviderUnavailable, "sent %s", secret).
		WithDetail("headers", map[string]any{"X-Key": []any{secret}, secret: "as a key"}).
		WithDetail("list", []string{"a", secret})
	got := r.Error(e)
	if got == e || got.Code != e.Code || strings.Contains(got.Error(), "s3cr") {
		t.Fatalf("Error: %v", got)
	}
	for _, v := range []any{got.Details["headers"], got.Details["list"]} {
		if s := fmt.Sprint(v); strings.Contains(s, "s3cr") {
			t.Fatalf("details kept the secret: %s", s)
		}
	}
	if !strings.Contains(e.Message, secret) {
		t.Fatal("the original error was changed")
	}
	var none *adapters.Redactor
	if none.String("x") != "x" || none.Error(e) != e {
		t.Fatal("a nil Redactor changed something")
	}
}

// TestRedactorTrimPartial: a text cut inside a secret, in any of its forms, loses the
// piece of it at its end, from minLen bytes on; shorter pieces, secrets whole (String
// removes those) and text that is no start of a secret stay.
func TestRedactorTrimPartial(t *testing.T) {
	const secret = "s3cr/t+<&>"
	r := adapters.NewRedactor(secret)
	for _, tc := range []struct{ in, want string }{
		{"cut: s3cr", "cut: "},
		{"cut: s3cr/t+<&", "cut: "},
		{"cut: s3cr%2Ft%2B", "cut: "}, // query-escaped
		{`cut: s3cr\/t`, "cut: "},     // an escaped solidus
		{"cut: s3c", "cut: s3c"},      // under minLen
		{"whole: " + secret, "whole: " + secret},
		{"s3cr is here", "s3cr is here"}, // not at the end
		{"", ""},
	} {
		if got := r.TrimPartial(tc.in, 4); got != tc.want {
			t.Errorf("TrimPartial(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	var none *adapters.Redactor
	if none.TrimPartial("s3cr", 1) != "s3cr" {
		t.Fatal("a nil Redactor trimmed something")
	}
}
