package redact

import (
	"encoding/base64"
	"encoding/hex"
	"net/url"
	"strings"
	"testing"
	"unicode/utf8"
)

const key = "sk-live-4f9a8c7e2b1d6f30a5e9"

func TestString(t *testing.T) {
	s := New("", key)
	b64 := func(enc *base64.Encoding, v string) string { return enc.EncodeToString([]byte(v)) }
	for _, tc := range []struct{ name, in string }{
		{"whole", "key " + key + " refused"},
		{"prefix", "key " + key[:len(key)-4] + "… refused"},
		{"suffix", "key …" + key[len(key)-9:] + " refused"},
		{"middle", "key …" + key[5:15] + "… refused"},
		{"base64", "Authorization: Basic " + b64(base64.StdEncoding, key) + " refused"},
		{"base64 of user:key", "Authorization: Basic " + b64(base64.StdEncoding, "user:"+key) + " refused"},
		{"base64 of ab:key", "Basic " + b64(base64.StdEncoding, "ab:"+key) + " refused"},
		{"base64 of a:key", "Basic " + b64(base64.StdEncoding, "a:"+key) + " refused"},
		{"url base64 raw", "token=" + b64(base64.RawURLEncoding, key) + " refused"},
		{"base64 of a prefix", "key " + b64(base64.StdEncoding, key[:20]) + " refused"},
		{"hex", "key 0x" + hex.EncodeToString([]byte(key)) + " refused"},
		{"HEX", "key " + strings.ToUpper(hex.EncodeToString([]byte(key))) + " refused"},
		{"percent", "GET /?key=" + url.QueryEscape("<"+key+">") + " refused"},
		{"json", `{"key":"` + key + `"} refused`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := s.String(tc.in)
			if !strings.Contains(got, Marker) || !strings.HasSuffix(got, " refused") {
				t.Fatalf("String(%q) = %q: want the secret replaced and the rest kept", tc.in, got)
			}
			for _, piece := range []string{key[:8], key[8:16], key[len(key)-8:], b64(base64.RawStdEncoding, key)[:8],
				hex.EncodeToString([]byte(key))[:8]} {
				if strings.Contains(got, piece) {
					t.Errorf("String(%q) = %q keeps %q", tc.in, got, piece)
				}
			}
		})
	}

	// Text that shares only short pieces with the secret is left alone.
	for _, in := range []string{"sk-live keys are refused", "the key 4f9a8c7 is short", ""} {
		if got := s.String(in); got != in {
			t.Errorf("String(%q) = %q, want it unchanged", in, got)
		}
	}

	// A short secret is removed whole, never in pieces.
	short := New("abc123")
	if got := short.String("abc123 and YWJjMTIz and abc12"); got != Marker+" and "+Marker+" and abc12" {
		t.Errorf("short secret: %q", got)
	}

	// Overlapping matches make one marker; a character is never cut in two.
	if got := New("ü-secret-ü-key").String("x ü-secret-ü-keyü-secret y"); got != "x "+Marker+" y" {
		t.Errorf("overlaps: %q", got)
	}
	if got := New("12345678").String("é345678é"); !utf8.ValidString(got) {
		t.Errorf("cut a character: %q", got)
	}

	var none *Set
	if none.String("x") != "x" || !none.Empty() || (&Set{}).String("x") != "x" {
		t.Error("an empty Set changed something")
	}
	if String("a "+key, key) != "a "+Marker {
		t.Error("String")
	}
}

func TestTrimPartial(t *testing.T) {
	s := New("s3cr/t+<&>")
	for _, tc := range []struct{ in, want string }{
		{"cut: s3cr", "cut: "},
		{"cut: s3cr%2Ft%2B", "cut: "},
		{"cut: s3c", "cut: s3c"},
		{"s3cr is here", "s3cr is here"},
	} {
		if got := s.TrimPartial(tc.in, 4); got != tc.want {
			t.Errorf("TrimPartial(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// FuzzString: whatever the text around it and whichever piece or encoding of the
// secret it holds, no part of the result outside the markers holds a piece of
// MinPartial bytes of the secret, of its hex or of its base64, nor the whole secret,
// and the result is valid UTF-8 when the text was.
func FuzzString(f *testing.F) {
	f.Add(key, "before ", " after", uint8(0), uint8(0), uint8(40))
	f.Add("short", "x", "y", uint8(1), uint8(0), uint8(5))
	f.Add("ü-secret-ü-key", "é", "", uint8(2), uint8(1), uint8(9))
	f.Add("12345678", "user:", "", uint8(3), uint8(0), uint8(8))
	f.Fuzz(func(t *testing.T, secret, before, after string, form, from, n uint8) {
		if secret == "" {
			return
		}
		lo := int(from) % len(secret)
		hi := min(len(secret), lo+int(n))
		piece := secret[lo:hi]
		var embedded string
		switch form % 5 {
		case 0:
			embedded = piece
		case 1:
			embedded = base64.StdEncoding.EncodeToString([]byte(before + piece))
		case 2:
			embedded = hex.EncodeToString([]byte(piece))
		case 3:
			embedded = url.QueryEscape(piece)
		case 4:
			embedded = base64.RawURLEncoding.EncodeToString([]byte(piece))
		}
		text := before + embedded + after
		got := New(secret).String(text)
		if utf8.ValidString(text) && !utf8.ValidString(got) {
			t.Fatalf("String(%q) = %q is not valid UTF-8", text, got)
		}
		var pieces []string
		if len(secret) >= MinPartial {
			for _, enc := range []string{secret, hex.EncodeToString([]byte(secret)), base64.RawStdEncoding.EncodeToString([]byte(secret))} {
				for i := 0; i+MinPartial <= len(enc); i++ {
					pieces = append(pieces, enc[i:i+MinPartial])
				}
			}
		}
		for _, part := range strings.Split(got, Marker) {
			if strings.Contains(part, secret) {
				t.Fatalf("String(%q) = %q keeps the secret %q", text, got, secret)
			}
			for _, p := range pieces {
				if strings.Contains(part, p) {
					t.Fatalf("String(%q) = %q keeps %q of the secret %q", text, got, p, secret)
				}
			}
		}
	})
}

// BenchmarkString scrubs an error body of the largest size httpx reads (64 KiB)
// holding no secret, against a bearer header and its token.
func BenchmarkString(b *testing.B) {
	s := New("Bearer "+key, key)
	text := strings.Repeat("a provider's error text, with nothing secret in it. ", 64<<10/52)
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		_ = s.String(text)
	}
}
