package ndjson

import (
	"testing"

	"github.com/different-ai/differently/api"
)

// FuzzAppendEvent encodes events made of arbitrary bytes (invalid UTF-8, NUL,
// control characters, U+2028 included): AppendEvent must write exactly what a
// json.Encoder without HTML escaping writes, which must mean what json.Marshal
// writes, and Decoder must read back what encoding/json reads, on its fast path.
func FuzzAppendEvent(f *testing.F) {
	for _, s := range tricky {
		f.Add([]byte(s), []byte("stdout"), 0, false, uint8(0))
	}
	f.Add([]byte("x"), []byte("weird\x00stream"), 0, false, uint8(0))
	f.Add([]byte("boom\xff"), []byte(""), 0, false, uint8(1))
	f.Add([]byte(""), []byte(""), 124, true, uint8(2))
	f.Add([]byte("\u2028"), []byte("stderr"), -1, true, uint8(3))
	f.Fuzz(func(t *testing.T, data, stream []byte, code int, timedOut bool, kind uint8) {
		var ev api.ExecEvent
		switch kind % 4 {
		case 0: // output
			ev = api.ExecEvent{Stream: string(stream), Data: string(data)}
		case 1: // a failed stream
			ev = api.ExecEvent{Error: string(data)}
		case 2: // an exit
			ev = api.ExecEvent{ExitCode: &code, TimedOut: timedOut}
		default: // everything at once, which no writer sends
			ev = api.ExecEvent{Stream: string(stream), Data: string(data), ExitCode: &code, TimedOut: timedOut, Error: string(data)}
		}
		line := checkEncode(t, ev)
		var d Decoder
		checkDecode(t, &d, line[:len(line)-1])
		checkFast(t, &d, line[:len(line)-1])
	})
}

// FuzzDecode reads arbitrary lines: Decoder must agree with json.Unmarshal on every
// one, valid or not.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		`{}`, `{"stream":"stdout","data":"hi\n"}`, `{"exitCode":0}`, `{"exitCode":124,"timedOut":true}`,
		`{"error":"backend went away"}`, `{"data":"\u0000\ud83d\ude00\ud83d\u2028"}`,
		"{\"data\":\"\xff\xe2\x82\"}", `{"data":"x","data":"y"}`, `{"Data":"x"}`, ` {"data":"x"} `,
		`{"exitCode":9223372036854775808}`, `{"exitCode":1e2}`, `{"exitCode":-0}`, `{"timedOut":null}`,
		`{"data":"\x"}`, `{"data":"a`, `not json`, ``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		var d Decoder
		checkDecode(t, &d, line)
	})
}
