package safeurl

import (
	"net/url"
	"strings"
	"testing"
)

func TestDescribe(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"https://plugin.internal:8443/v1", "https://plugin.internal:8443/v1"},
		{"https://u:p%zz@host/x", "https://[redacted]@host/x"},
		{"u:token@plugin:8443", "[redacted]@plugin:8443"},
		{"https://user@host", "https://[redacted]@host"},
		{"https://a@b@host/p", "https://[redacted]@host/p"},
		{"https://host/p@q", "https://[redacted]@q"},
		{"https://user:sec/ret@host/v1", "https://[redacted]@host/v1"},
		{"https://user:sec#ret@host", "https://[redacted]@host"},
		{"https://user:sec?ret@host?x=1", "https://[redacted]@host?[redacted]"},
		{"https://host/path?token=s3cret", "https://host/path?[redacted]"},
		{"https://host/path#frag", "https://host/path#[redacted]"},
		{"https://u:p@host?key=k", "https://[redacted]@host?[redacted]"},
		{"ftp://x", "ftp://x"},
		{"", ""},
		{"://@", "://[redacted]@"},
	} {
		if got := Describe(c.in); got != c.want {
			t.Errorf("Describe(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestReason(t *testing.T) {
	_, err := url.Parse("https://u:p%zz@host/x")
	if err == nil {
		t.Fatal("the URL parsed")
	}
	if got := Reason(err).Error(); strings.Contains(got, "u:p") || strings.Contains(got, "host") {
		t.Fatalf("Reason quotes the URL: %s", got)
	}
	// An error that quotes only part of the URL: a password's first half as a port.
	_, err = url.Parse("https://user:sec/ret@host/v1")
	if err == nil {
		t.Fatal("the URL parsed")
	}
	if got := Reason(err).Error(); strings.Contains(got, "sec") {
		t.Fatalf("Reason quotes part of the URL: %s", got)
	}
}
