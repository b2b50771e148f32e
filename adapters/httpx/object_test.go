package httpx_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/different-ai/differently/adapters/httpx"
	"github.com/different-ai/differently/api"
)

// answer is what the tests read with ReadObject: two output strings and an exit code.
type answer struct {
	out, err strings.Builder
	code     *int
}

func (a *answer) fields() httpx.Fields {
	return httpx.Fields{
		Strings: map[string]io.Writer{"out": &a.out, "err": &a.err},
		Values:  map[string]any{"code": &a.code},
	}
}

// readers gives the input whole and in awkward pieces, so that characters, escapes
// and keys are also met cut in two.
var readers = map[string]func(string) io.Reader{
	"whole":    func(s string) io.Reader { return strings.NewReader(s) },
	"one byte": func(s string) io.Reader { return iotest.OneByteReader(strings.NewReader(s)) },
	"halves":   func(s string) io.Reader { return iotest.HalfReader(strings.NewReader(s)) },
}

func TestReadObjectDecodes(t *testing.T) {
	big := strings.Repeat("é€a", 100_000) // 600 kB of whole characters
	tests := []struct {
		name, in, out, err string
		code               int
	}{
		{"exit code first", `{"code":3,"out":"o","err":"e"}`, "o", "e", 3},
		{"exit code last", `{"out":"` + big + `","err":"e","code":4}`, big, "e", 4},
		{"white space", " \t\r\n{ \"out\" : \"o\" , \"code\" :\n0 }\n", "o", "", 0},
		{"null output", `{"out":null,"code":1}`, "", "", 1},
		{"unknown members skipped", `{"x":{"y":[1,-2.5e3,true,false,null,{"out":"no"}],"z":{}},"w":[],"v":"` + big + `","out":"o","code":0}`, "o", "", 0},
		{"escapes", `{"out":"q\"b\\s\/\b\f\n\r\t\u00e9\u20AC\ud83d\ude00","code":0}`, "q\"b\\s/\b\f\n\r\t\u00e9€😀", "", 0},
		{"lone surrogates", `{"out":"\ud800x\ud800\u0041\udc00\ud83d","code":0}`, "\uFFFDx\uFFFDA\uFFFD\uFFFD", "", 0},
		{"invalid UTF-8", "{\"out\":\"a\xffb\xe2\x82\",\"code\":0}", "a\uFFFDb\uFFFD\uFFFD", "", 0},
		{"a long key matches nothing", `{"` + strings.Repeat("out", 100) + `":"no","code":2}`, "", "", 2},
		{"escaped key", `{"\u006fut":"o","code":0}`, "o", "", 0},
		{"keys in another case, as encoding/json matches them", `{"OUT":"o","Err":"e","CODE":5}`, "o", "e", 5},
	}
	for _, tt := range tests {
		for rname, reader := range readers {
			var a answer
			if err := httpx.ReadObject(reader(tt.in), 1<<30, a.fields()); err != nil {
				t.Errorf("%s, %s: %v", tt.name, rname, err)
				continue
			}
			if a.out.String() != tt.out || a.err.String() != tt.err || a.code == nil || *a.code != tt.code {
				t.Errorf("%s, %s: out %.40q err %q code %v, want %.40q %q %d", tt.name, rname, a.out.String(), a.err.String(), a.code, tt.out, tt.err, tt.code)
			}
		}
	}
}

func TestReadObjectRefusesMalformed(t *testing.T) {
	for _, in := range []string{
		``, `  `, `[]`, `"s"`, `null`, `{`, `{"out":"a"`, `{"out":"a"}x`, `{"out":"a"}{}`,
		`{"out":1}`, `{"out":{}}`, `{"code":"x"}`, "{\"out\":\"a\x01\"}", `{"out":"\q"}`,
		`{"out":"\u12"}`, `{"out":"\u12g4"}`, `{"a":01}`, `{"a":[1,]}`, `{"a" 1}`, `{"a":1,}`,
		`{,}`, `{"a":tru}`, `{"a":1"b":2}`, `{a:1}`, `{"a":-}`, `{"a":[}`, `{"a":"` + "\n" + `"}`,
	} {
		for rname, reader := range readers {
			var a answer
			err := httpx.ReadObject(reader(in), 1<<30, a.fields())
			var m *httpx.MalformedError
			if !errors.As(err, &m) {
				t.Errorf("%q, %s: %v, want a MalformedError", in, rname, err)
			}
		}
	}
}

// TestReadObjectHoldsNoStringWhole: a string far larger than the read buffer
// reaches its writer in pieces, and input past the limit is ErrTooLarge, whether
// the limit falls in a string or after the object.
func TestReadObjectBounds(t *testing.T) {
	in := `{"out":"` + strings.Repeat("a", 4<<20) + `","code":0}`
	var most int
	w := writerFunc(func(p []byte) (int, error) { most = max(most, len(p)); return len(p), nil })
	if err := httpx.ReadObject(strings.NewReader(in), int64(len(in)), httpx.Fields{Strings: map[string]io.Writer{"out": w}}); err != nil {
		t.Fatal(err)
	}
	if most > 64<<10 {
		t.Errorf("a write of %d bytes: the string was held whole", most)
	}
	for _, limit := range []int{len(in) - 1, 100} {
		var a answer
		if err := httpx.ReadObject(strings.NewReader(in), int64(limit), a.fields()); !errors.Is(err, httpx.ErrTooLarge) {
			t.Errorf("limit %d for %d bytes: %v, want ErrTooLarge", limit, len(in), err)
		}
	}
	var a answer
	if err := httpx.ReadObject(strings.NewReader(in+"  "), int64(len(in)+1), a.fields()); !errors.Is(err, httpx.ErrTooLarge) {
		t.Errorf("white space past the limit: %v, want ErrTooLarge", err)
	}
	var v struct{}
	huge := `{"code":[` + strings.Repeat(`"abcdefgh",`, 200_000) + `1]}`
	if err := httpx.ReadObject(strings.NewReader(huge), 1<<30, httpx.Fields{Values: map[string]any{"code": &v}}); err == nil {
		t.Error("a value of over 1 MiB was decoded")
	}
}

func TestReadObjectPassesWriterErrors(t *testing.T) {
	stop := errors.New("stop")
	w := writerFunc(func(p []byte) (int, error) { return 0, stop })
	err := httpx.ReadObject(strings.NewReader(`{"out":"x"}`), 100, httpx.Fields{Strings: map[string]io.Writer{"out": w}})
	if err != stop {
		t.Fatalf("%v, want the writer's error", err)
	}
}

// TestJSONObject: an exec-like answer of any size is read with its exit code last;
// too large and malformed answers are provider_unavailable with a message that says
// which.
func TestJSONObject(t *testing.T) {
	body := `{"out":"` + strings.Repeat("x", 2<<20) + `","code":7}`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/ok":
			io.WriteString(w, body)
		case "/bad":
			io.WriteString(w, `{"out":"x",`)
		}
	}))
	defer srv.Close()
	c, err := httpx.New("prov", srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	var a answer
	if err := c.JSONObject(t.Context(), "POST", "/ok", nil, map[string]int{"x": 1}, 4<<20, a.fields()); err != nil {
		t.Fatal(err)
	}
	if a.out.Len() != 2<<20 || a.code == nil || *a.code != 7 {
		t.Fatalf("%d bytes out, code %v", a.out.Len(), a.code)
	}
	for _, tc := range []struct {
		path  string
		limit int64
		want  string
	}{
		{"/ok", 1 << 20, "answer to POST /ok is over 1 MiB"},
		{"/bad", 1 << 20, "malformed answer to POST /bad"},
	} {
		var a answer
		err := c.JSONObject(t.Context(), "POST", tc.path, nil, nil, tc.limit, a.fields())
		if api.CodeOf(err) != api.CodeProviderUnavailable || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want provider_unavailable saying %q", tc.path, err, tc.want)
		}
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// FuzzReadObject holds ReadObject to encoding/json: an object json accepts is read
// (unless "s" is not a string), with the same "s" and "v"; anything else fails.
func FuzzReadObject(f *testing.F) {
	for _, s := range []string{
		`{"s":"a\u00e9\ud83d\ude00\ud800","v":[1,{"a":null}]}`, `{"v":1,"s":null}`, "{\"s\":\"\xff\xe2\x82\"}",
		`{"s":1}`, `{"x":{"s":"no"},"s":"yes"}`, `[]`, `{"s":"\u12"}`, ` {} `,
	} {
		f.Add([]byte(s), false)
	}
	f.Fuzz(func(t *testing.T, data []byte, oneByte bool) {
		if len(data) > 4000 {
			return // past ReadObject's bound on a number
		}
		var s strings.Builder
		var v any
		var r io.Reader = bytes.NewReader(data)
		if oneByte {
			r = iotest.OneByteReader(r)
		}
		err := httpx.ReadObject(r, 1<<20, httpx.Fields{Strings: map[string]io.Writer{"s": &s}, Values: map[string]any{"v": &v}})
		var object map[string]any
		isObject := json.Valid(data) && bytes.HasPrefix(bytes.TrimLeft(data, " \t\r\n"), []byte("{")) && json.Unmarshal(data, &object) == nil
		// Decoded into a struct, json matches keys as ReadObject does: exactly, or
		// else ignoring case.
		var want struct {
			S any `json:"s"`
			V any `json:"v"`
		}
		_ = json.Unmarshal(data, &want)
		str, isString := want.S.(string)
		switch {
		case !isObject:
			if err == nil {
				t.Fatalf("%q is no JSON object, yet read", data)
			}
		case want.S != nil && !isString:
			if err == nil {
				t.Fatalf("%q: a non-string s was read", data)
			}
		case err != nil && countKey(data, "s") > 1:
			// Several s members: ReadObject refuses a non-string one wherever it
			// stands, where json keeps only the last.
		case err != nil:
			t.Fatalf("%q: %v", data, err)
		case countKey(data, "s") <= 1 && s.String() != str:
			t.Fatalf("%q: s is %q, want %q", data, s.String(), str)
		case !reflect.DeepEqual(v, want.V):
			t.Fatalf("%q: v is %#v, want %#v", data, v, want.V)
		}
	})
}

// countKey counts the top-level members named key, in any case: json keeps the last
// of several, ReadObject writes them all.
func countKey(data []byte, key string) int {
	dec := json.NewDecoder(bytes.NewReader(data))
	if _, err := dec.Token(); err != nil {
		return 0
	}
	n := 0
	for dec.More() {
		k, err := dec.Token()
		var v json.RawMessage
		if err != nil || dec.Decode(&v) != nil {
			return n
		}
		if name, ok := k.(string); ok && strings.EqualFold(name, key) {
			n++
		}
	}
	return n
}
