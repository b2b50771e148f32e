package ndjson

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/different-ai/differently/api"
)

// tricky strings: every escaping rule of encoding/json, at word boundaries and not.
var tricky = []string{
	"", "a", "plain ascii text that is longer than eight bytes",
	"\x00", strings.Repeat("\x00", 17), "\x01\x1f\x7f", "\b\f\n\r\t", `"\/`,
	"<script>&amp;</script>", "1234567<", "12345678<", "123456789&",
	"héllo wörld", "日本語のテキスト", "emoji 😀 and more 🎉",
	"\u2028\u2029", "1234567\u2028", "\ufffd", "\uffff", "\U0010ffff",
	"\xff", "\xfe\xff", "abc\xe2\x82", "\xe2\x82\xac", "\xed\xa0\x80", // a surrogate, encoded
	"\xc0\xaf", "\xf4\x90\x80\x80", "12345678\x80",
	strings.Repeat("x", 1000) + "\x00" + strings.Repeat("y", 1000),
}

func events(strs []string) []api.ExecEvent {
	code, neg, big, lo, hi := 0, -7, 1<<40, math.MinInt, math.MaxInt
	evs := []api.ExecEvent{
		{}, {ExitCode: &code}, {ExitCode: &neg, TimedOut: true}, {ExitCode: &big}, {ExitCode: &lo}, {ExitCode: &hi},
		{TimedOut: true}, {Error: "backend went away"}, {Error: "stream broke off", Code: api.CodeProviderUnavailable},
	}
	for _, s := range strs {
		evs = append(evs,
			api.ExecEvent{Stream: api.StreamStdout, Data: s},
			api.ExecEvent{Stream: api.StreamStderr, Data: s},
			api.ExecEvent{Stream: s, Data: s, ExitCode: &code, TimedOut: true, Error: s},
			api.ExecEvent{Error: s},
			api.ExecEvent{Error: s, Code: api.Code(s)},
		)
	}
	return evs
}

// checkEncode compares AppendEvent with a json.Encoder without HTML escaping, byte
// for byte, and checks that json.Marshal's output means the same.
func checkEncode(t *testing.T, ev api.ExecEvent) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(ev); err != nil {
		t.Fatal(err)
	}
	want := buf.Bytes()
	marshalled, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	var a, b api.ExecEvent
	if json.Unmarshal(want, &a) != nil || json.Unmarshal(marshalled, &b) != nil || !reflect.DeepEqual(a, b) {
		t.Fatalf("%q and %q differ in meaning", want, marshalled)
	}
	prefix := []byte("prefix")
	got := AppendEvent(bytes.Clone(prefix), ev)
	if !bytes.HasPrefix(got, prefix) || !bytes.Equal(got[len(prefix):], want) {
		t.Fatalf("AppendEvent(%#v)\n got %q\nwant %q", ev, got[len(prefix):], want)
	}
	return got[len(prefix):]
}

// checkDecode compares Decoder.Decode with json.Unmarshal: the same event, or an
// error exactly when encoding/json gives one.
func checkDecode(t *testing.T, d *Decoder, line []byte) {
	t.Helper()
	var want api.ExecEvent
	wantErr := json.Unmarshal(line, &want)
	got, err := d.Decode(line)
	if (err != nil) != (wantErr != nil) || (err != nil && err.Error() != wantErr.Error()) {
		t.Fatalf("Decode(%q): error %v, encoding/json %v", line, err, wantErr)
	}
	if err == nil && !reflect.DeepEqual(got, want) {
		t.Fatalf("Decode(%q)\n got %#v\nwant %#v", line, got, want)
	}
}

func TestAppendEventMatchesEncodingJSON(t *testing.T) {
	for _, ev := range events(tricky) {
		checkEncode(t, ev)
	}
	// Every single byte, and every byte in every position of a word.
	for b := range 256 {
		for pos := range 9 {
			s := strings.Repeat("a", pos) + string([]byte{byte(b)}) + strings.Repeat("z", 8)
			checkEncode(t, api.ExecEvent{Data: s})
		}
	}
}

// checkFast checks that a line AppendEvent wrote takes the fast path.
func checkFast(t *testing.T, d *Decoder, line []byte) {
	t.Helper()
	if _, ok := d.decodeFast(line); !ok {
		t.Fatalf("%q did not take the fast path", line)
	}
}

func TestDecodeMatchesEncodingJSON(t *testing.T) {
	var d Decoder
	for _, ev := range events(tricky) {
		line := checkEncode(t, ev)
		checkDecode(t, &d, line[:len(line)-1])
		checkFast(t, &d, line[:len(line)-1])
	}
	for _, line := range []string{
		``, `{`, `}`, `{}`, `null`, `[]`, ` {}`, `{} `, `{}{}`, `{,}`, `{"data":"x",}`,
		`{"data":"x"}`, `{"data":"x","data":"y"}`, `{"Data":"x"}`, `{"DATA":"x","data":"y"}`,
		`{"data":null}`, `{"data":1}`, `{"data":"x" }`, `{"data" :"x"}`, `{"other":1,"data":"x"}`,
		`{"data":"\u0000\u001f\u0041\u00e9\u2028"}`, `{"data":"\ud83d\ude00"}`,
		`{"data":"\ud83d"}`, `{"data":"\ud83dx"}`, `{"data":"\ude00\ud83d"}`, `{"data":"\ud83d\u0041"}`,
		`{"data":"\ud83d\ud83d\ude00"}`, `{"data":"\uD83D\uDE00"}`, `{"data":"\u12"}`, `{"data":"\u12g4"}`,
		`{"data":"\x"}`, `{"data":"\"}`, `{"data":"\\"}`, `{"data":"\/\b\f\n\r\t"}`,
		"{\"data\":\"a\tb\"}", "{\"data\":\"\x00\"}", "{\"data\":\"\x7f\"}", "{\"data\":\"\xff\xfe\"}",
		"{\"data\":\"ok\xe2\x82\"}", "{\"data\":\"\xed\xa0\x80\"}", "{\"data\":\"x\\u0000\xff\"}",
		`{"exitCode":0}`, `{"exitCode":-0}`, `{"exitCode":-1}`, `{"exitCode":01}`, `{"exitCode":1.0}`,
		`{"exitCode":1e2}`, `{"exitCode":1.5}`, `{"exitCode":-}`, `{"exitCode":999999999999999999}`,
		`{"exitCode":9223372036854775807}`, `{"exitCode":9223372036854775808}`,
		`{"exitCode":-9223372036854775808}`, `{"exitCode":-9223372036854775809}`, `{"exitCode":1000000000000000000}`,
		`{"exitCode":18446744073709551615}`, `{"exitCode":18446744073709551616}`, `{"exitCode":-18446744073709551617}`,
		`{"exitCode":99999999999999999999}`, `{"exitCode":null}`,
		`{"exitCode":"0"}`, `{"exitCode":0,"timedOut":true}`, `{"timedOut":false}`, `{"timedOut":tru}`,
		`{"timedOut":truex}`, `{"timedOut":1}`, `{"error":"x","exitCode":3}`,
		`{"stream":"stdout","data":"a"}`, `{"stream":"stdo\u0075t","data":"a"}`, `{"stream":"other"}`,
	} {
		checkDecode(t, &d, []byte(line))
	}
}

// TestCodecRandom round-trips random events of random bytes, biased towards the
// characters that need care, through both codecs and against encoding/json.
func TestCodecRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []string{"a", "z", "\x00", "\x1f", "\"", "\\", "<", "&", "\n", "é", "😀", "\u2028", "\xff", "\xe2\x82", "\xed\xa0\x80"}
	var d Decoder
	for range 3000 {
		var sb strings.Builder
		for range rng.IntN(64) {
			if rng.IntN(3) == 0 {
				sb.WriteByte(byte(rng.IntN(256)))
			} else {
				sb.WriteString(alphabet[rng.IntN(len(alphabet))])
			}
		}
		code := rng.IntN(300) - 10
		ev := api.ExecEvent{Stream: api.StreamStdout, Data: sb.String()}
		if rng.IntN(4) == 0 {
			ev = api.ExecEvent{ExitCode: &code, TimedOut: rng.IntN(2) == 0, Error: sb.String()}
		}
		line := checkEncode(t, ev)
		checkDecode(t, &d, line[:len(line)-1])
		checkFast(t, &d, line[:len(line)-1])
	}
}

func BenchmarkAppendEvent(b *testing.B) {
	for _, c := range []struct{ name, data string }{
		{"printable", strings.Repeat("x", 1<<20)},
		{"text", strings.Repeat("héllo, wörld\n", 1<<16)},
		{"nul", strings.Repeat("\x00", 1<<20)},
	} {
		ev := api.ExecEvent{Stream: api.StreamStdout, Data: c.data}
		b.Run(c.name+"/fast", func(b *testing.B) {
			b.SetBytes(int64(len(c.data)))
			var buf []byte
			for b.Loop() {
				buf = AppendEvent(buf[:0], ev)
			}
		})
		b.Run(c.name+"/encoding-json", func(b *testing.B) {
			b.SetBytes(int64(len(c.data)))
			var buf bytes.Buffer
			enc := json.NewEncoder(&buf)
			enc.SetEscapeHTML(false)
			for b.Loop() {
				buf.Reset()
				_ = enc.Encode(ev)
			}
		})
		line := AppendEvent(nil, ev)
		line = line[:len(line)-1]
		b.Run(c.name+"/decode-fast", func(b *testing.B) {
			b.SetBytes(int64(len(c.data)))
			var d Decoder
			for b.Loop() {
				_, _ = d.Decode(line)
			}
		})
		b.Run(c.name+"/decode-encoding-json", func(b *testing.B) {
			b.SetBytes(int64(len(c.data)))
			for b.Loop() {
				var ev api.ExecEvent
				_ = json.Unmarshal(line, &ev)
			}
		})
	}
}

// TestWordTests checks the word-at-a-time tests against byte-by-byte ones, for every
// pair of byte values at every two positions of a word otherwise made of one filler:
// borrows between neighbours are where such tricks go wrong.
func TestWordTests(t *testing.T) {
	plain := func(b byte) bool { return b >= 0x20 && b < 0x80 && b != '"' && b != '\\' }
	for _, fill := range []byte{'a', ' ', '~', '!', '#', '[', ']'} {
		for b1 := range 256 {
			for b2 := range 256 {
				for _, pos := range [][2]int{{0, 1}, {1, 0}, {3, 4}, {6, 7}, {7, 6}, {0, 7}, {2, 5}} {
					var w [8]byte
					for i := range w {
						w[i] = fill
					}
					w[pos[0]], w[pos[1]] = byte(b1), byte(b2)
					x := load64b(w[:], 0)
					wantText, wantPlain := true, true
					for _, b := range w {
						wantText = wantText && b >= 0x20 && b < utf8.RuneSelf
						wantPlain = wantPlain && plain(b)
					}
					if (outsideASCIIText(x)&msb == 0) != wantText || (plainBytes(x) == 0) != wantPlain || load64(string(w[:]), 0) != x {
						t.Fatalf("word %q: outsideASCIIText %#x, plainBytes %#x", w, outsideASCIIText(x), plainBytes(x))
					}
				}
			}
		}
	}
}
