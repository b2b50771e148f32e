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

	// A short secret is removed whole, never in pieces, and not in its encodings.
	short := New("abc123")
	if got := short.String("abc123 and YWJjMTIz and abc12"); got != Marker+" and YWJjMTIz and abc12" {
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
// MinPartial bytes of the secret, of its hex or of its base64, nor the whole secret
// (but a secret shorter than MinPartial joined to a word), and the result is valid
// UTF-8 when the text was.
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
		parts := strings.Split(got, Marker)
		for k, part := range parts {
			// A secret shorter than MinPartial may be left inside a word. A marker
			// stands for what it replaced, which may have been the word it was
			// joined to: next to one, count it as a letter.
			edged, shift := part, 0
			if k > 0 {
				edged, shift = "a"+edged, 1
			}
			if k < len(parts)-1 {
				edged += "a"
			}
			for from := 0; ; from++ {
				i := strings.Index(part[from:], secret)
				if i < 0 {
					break
				}
				from += i
				if len(secret) >= MinPartial || apart(edged, from+shift, from+shift+len(secret)) {
					t.Fatalf("String(%q) = %q keeps the secret %q", text, got, secret)
				}
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

// TestShortSecrets: a secret shorter than MinPartial is removed where it stands apart
// (and as JSON writes it), never inside a longer word or number, and never as its
// hex, base64 or percent-escapes, which are ordinary text at that length.
func TestShortSecrets(t *testing.T) {
	for _, tc := range []struct{ secret, in, want string }{
		{"1", "line 12", "line 12"},
		{"1", "error 31 at MQTT", "error 31 at MQTT"}, // hex and base64 of "1"
		{"1", "key 1 refused", "key " + Marker + " refused"},
		{"1", "key=1&x=2", "key=" + Marker + "&x=2"},
		{"dev", "development", "development"},
		{"dev", "ZGV2 646576 devs", "ZGV2 646576 devs"},
		{"dev", `token "dev" refused`, `token "` + Marker + `" refused`},
		{"dev", "dev", Marker},
		{"dev", "a_dev", "a_dev"},
		{"dev", "dev-1", Marker + "-1"},
		{"p@ss", "p%40ss and p@ss.", "p%40ss and " + Marker + "."},
		{"a/b", `{"k":"a\/b"}`, `{"k":"` + Marker + `"}`},
		{"<x>", `{"k":"\u003cx\u003e"}`, `{"k":"` + Marker + `"}`},
		{"-x-", "a-x-b", "a" + Marker + "b"}, // no word character at its ends
		{"é", "café é", "café " + Marker},
	} {
		if got := New(tc.secret).String(tc.in); got != tc.want {
			t.Errorf("secret %q: String(%q) = %q, want %q", tc.secret, tc.in, got, tc.want)
		}
	}
}

// TestPercentEscapesEitherCase: a secret escaped with lower-case hex digits (%2f) is
// removed as one escaped in upper case is, whole, in pieces and when cut short.
func TestPercentEscapesEitherCase(t *testing.T) {
	secret := "s3cr/t+<&>-long-enough"
	s := New(secret)
	upper := url.QueryEscape(secret) // s3cr%2Ft%2B%3C%26%3E-long-enough
	lower := strings.NewReplacer("%2F", "%2f", "%2B", "%2b", "%3C", "%3c", "%3E", "%3e").Replace(upper)
	mixed := strings.Replace(upper, "%3C", "%3c", 1)
	for _, in := range []string{upper, lower, mixed, lower[:14], lower[4:]} {
		text := "GET /?k=" + in + " refused"
		if got := s.String(text); got != "GET /?k="+Marker+" refused" {
			t.Errorf("String(%q) = %q", text, got)
		}
	}
	if got := s.TrimPartial("cut: s3cr%2ft%2", 4); got != "cut: " {
		t.Errorf("TrimPartial of a lower-case escape = %q", got)
	}
	// Lower-case escapes of other text are left as they were.
	if got := s.String("path /a%2fb%e2%80%a6 ok"); got != "path /a%2fb%e2%80%a6 ok" {
		t.Errorf("unrelated escapes: %q", got)
	}
}
