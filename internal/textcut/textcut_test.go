package textcut_test

import (
	"testing"

	"github.com/different-ai/differently/internal/textcut"
)

func TestPrefix(t *testing.T) {
	for _, tc := range []struct {
		s    string
		n    int
		want string
	}{
		{"hello", 10, "hello"},
		{"hello", 5, "hello"},
		{"hello", 3, "hel"},
		{"héllo", 2, "h"},  // é is two bytes: not cut in half
		{"héllo", 3, "hé"}, // ends right after it
		{"€uro", 2, ""},    // € is three bytes
		{"abc", 0, ""},
		{"abc", -1, ""},
	} {
		if got := textcut.Prefix(tc.s, tc.n); got != tc.want {
			t.Errorf("Prefix(%q, %d) = %q, want %q", tc.s, tc.n, got, tc.want)
		}
	}
}
