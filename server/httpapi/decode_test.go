package httpapi

import (
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/different-ai/differently/api"
)

func TestDecodeBody(t *testing.T) {
	for _, c := range []struct {
		body string
		ok   bool
		want string // in the message when refused
	}{
		{`{"template":"base","labels":{"Env":"x"},"placement":{"allowedPools":["a"]}}`, true, ""},
		{`{"Template":"base"}`, false, `unknown field "Template": field names are case-sensitive (did you mean "template"?)`},
		{`{"TEMPLATE":"base"}`, false, `did you mean "template"?`},
		{`{"placement":{"AllowedPools":["a"]}}`, false, `unknown field "placement.AllowedPools"`},
		{`{"resources":{"cpu":1,"MemoryMiB":1}}`, false, `case-sensitive`},
		{`{"template":"base","unknown":1}`, false, `unknown field "unknown"`},
		{"{\"template\":\"ba\xffse\"}", false, "not valid UTF-8"},
		{"{\"labels\":{\"\xc3\":\"x\"}}", false, "not valid UTF-8"},
		// An escaped surrogate that UTF-16 does not pair would become U+FFFD.
		{`{"template":"a\ud800b"}`, false, `the escape \ud800 at byte 14 is half of a UTF-16 surrogate pair`},
		{`{"template":"\udc00"}`, false, "surrogate"},
		{`{"template":"\uDBFF"}`, false, "surrogate"},
		{`{"template":"\ude00\ud83d"}`, false, "surrogate"},
		{`{"template":"\ud83d\ud83d\ude00"}`, false, "surrogate"},
		{`{"template":"\ud83d\n"}`, false, "surrogate"},
		{`{"labels":{"\ud800":"x"}}`, false, "surrogate"},
		{`{"template":"\ud83d\ude00 \uD83D\uDE00 \u00e9 \ufffd"}`, true, ""},
		{`{"template":"\\ud800"}`, true, ""}, // a backslash, then the text "ud800"
		{`{"template":"\"\ud83d\ude00\\"}`, true, ""},
		{``, false, "empty"},
		{`{} {}`, false, "more than one"},
	} {
		var v SandboxCreate
		err := decodeBody([]byte(c.body), &v, false)
		if c.ok {
			if err != nil {
				t.Errorf("%q: %v", c.body, err)
			}
			continue
		}
		e := api.AsError(err)
		if e == nil || e.Code != api.CodeInvalidRequest || !strings.Contains(e.Message, c.want) {
			t.Errorf("%q: %v, want invalid_request with %q", c.body, err, c.want)
		}
	}
}

// FuzzDecodeBody: decodeBody never panics, refuses with invalid_request only, and
// what it takes is UTF-8 JSON whose keys name SandboxCreate's fields exactly.
func FuzzDecodeBody(f *testing.F) {
	for _, s := range []string{`{"template":"x"}`, `{"Template":"x"}`, `{"placement":{"Regions":[]}}`,
		`{"labels":{"A":"b"}}`, "{\"template\":\"\xff\"}", `[{"a":1}]`, `{"placement":[{"x":{}}]}`, `null`, `{}`,
		`{"template":"a\ud800b"}`, `{"template":"\ud83d\ude00"}`, `{"labels":{"\\ud800":"\udc00"}}`} {
		f.Add([]byte(s))
	}
	fields := jsonFields(reflect.TypeFor[SandboxCreate]())
	f.Fuzz(func(t *testing.T, data []byte) {
		var v SandboxCreate
		err := decodeBody(data, &v, true)
		if err != nil {
			if e := api.AsError(err); e == nil || e.HTTPStatus() != http.StatusBadRequest {
				t.Fatalf("%q: %v", data, err)
			}
			return
		}
		if len(strings.TrimSpace(string(data))) == 0 {
			return
		}
		if !utf8.Valid(data) || !json.Valid(data) {
			t.Fatalf("took %q", data)
		}
		var top map[string]json.RawMessage
		if json.Unmarshal(data, &top) == nil {
			for k := range top {
				if _, ok := fields[k]; !ok {
					t.Fatalf("took key %q of %q", k, data)
				}
			}
		}
	})
}
