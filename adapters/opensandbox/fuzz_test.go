package opensandbox

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/different-ai/differently/api"
)

// FuzzExecdEvents feeds execd's event reader two streams: the fuzzer's raw bytes,
// which must never panic and may only fail as provider_unavailable, and a
// well-formed stream of the fuzzer's texts (one output event per text, in SSE or
// bare-JSON framing, with comments and CRLF thrown in), which must come back whole
// and in order, also when a line limit of 20 bytes sends most of its lines down
// the long-line path.
func FuzzExecdEvents(f *testing.F) {
	for _, s := range []string{
		"{\"type\":\"init\",\"text\":\"cmd1\"}\n\n{\"type\":\"stdout\",\"text\":\"hi\"}\n\n{\"type\":\"execution_complete\"}\n\n",
		"data: {\"type\":\"stdout\",\"text\":\"a\"}\n\ndata: {\"type\":\"error\",\"error\":{\"ename\":\"CommandExecError\",\"evalue\":\"3\"}}\n\n",
		": comment\nevent: x\nid: 1\nretry: 5\ndata: {\"type\":\"stderr\",\n data: \"text\":\"split\"}\n\n",
		"{\"type\":\"stdout\",\"text\":\"no blank line\"}{\"type\":\"stdout\"}",
		"{\"type\":\"stdout\",\"text\":\"x\"}\r\n\r\n",
		"{\"type\":", "not json\n\n", "\n\n\n", "data:\n\n", "{}\n\n", "[1,2]\n\n", "\x00\xff\n\n", "",
	} {
		f.Add([]byte(s), "one\x00two lines\nthree", false)
	}
	f.Add([]byte("{}"), "a\x00\x00b", true)
	f.Add([]byte("{}"), "é\r\n\x00data: fake\n\n\x00{\"type\":\"stdout\"}", true)
	f.Fuzz(func(t *testing.T, raw []byte, joined string, sse bool) {
		err := readEvents(bytes.NewReader(raw), func(execEvent) (bool, error) { return false, nil })
		if err != nil && (api.AsError(err) == nil || api.CodeOf(err) != api.CodeProviderUnavailable) {
			t.Fatalf("raw stream %q: %v", raw, err)
		}

		texts := strings.Split(joined, "\x00")
		var stream bytes.Buffer
		for i, text := range texts {
			ev, _ := json.Marshal(execEvent{Type: "stdout", Text: text})
			switch {
			case sse && i%2 == 0:
				fmt.Fprintf(&stream, ": keep-alive\r\nevent: stdout\ndata: %s\r\n\r\n", ev)
			case sse:
				fmt.Fprintf(&stream, "data:%s\n\n", ev)
			default:
				fmt.Fprintf(&stream, "%s\n\n", ev)
			}
		}
		// Once as it is, and once with lines over a few bytes read as long ones.
		for _, read := range []func(string, func(execEvent) (bool, error)) error{
			func(s string, h func(execEvent) (bool, error)) error { return readEvents(strings.NewReader(s), h) },
			func(s string, h func(execEvent) (bool, error)) error {
				r := eventReader{br: bufio.NewReaderSize(strings.NewReader(s), 16), handle: h, maxLine: 20, maxEvent: 1 << 20}
				return r.read()
			},
		} {
			var got []string
			err = read(stream.String(), func(ev execEvent) (bool, error) {
				switch {
				case ev.Type != "stdout":
					t.Fatalf("event %+v", ev)
				case ev.more:
					got[len(got)-1] += ev.Text
				default:
					got = append(got, ev.Text)
				}
				return false, nil
			})
			if err != nil {
				t.Fatalf("well-formed stream of %q: %v", texts, err)
			}
			if len(got) != len(texts) {
				t.Fatalf("%d events for %d texts: %q vs %q", len(got), len(texts), got, texts)
			}
			for i := range texts {
				// JSON carries text: invalid UTF-8 arrives as U+FFFD, as in any JSON event.
				var want string
				enc, _ := json.Marshal(texts[i])
				_ = json.Unmarshal(enc, &want)
				if got[i] != want {
					t.Fatalf("event %d is %q, want %q", i, got[i], texts[i])
				}
			}
		}
	})
}
