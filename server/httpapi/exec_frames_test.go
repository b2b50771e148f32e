package httpapi_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/internal/frames"
	"github.com/different-ai/differently/internal/ndjson"
	"github.com/different-ai/differently/server/store"
)

// streamed is what one streamed exec delivered: each stream's output and the final
// event as it was sent (the NDJSON line without its newline, the final frame's payload).
type streamed struct {
	contentType    string
	stdout, stderr []byte
	final          string
}

// execStreamed runs a streamed exec through the loopback server with the given
// Accept header and reads the whole answer in the format its Content-Type names.
func (e *env) execStreamed(t *testing.T, id, accept string, req api.ExecRequest) streamed {
	t.Helper()
	body, _ := json.Marshal(req)
	h := http.Header{}
	if accept != "" {
		h.Set("Accept", accept)
	}
	r := e.request(e.admin, "POST", "/v1/sandboxes/"+id+"/exec?stream=1", bytes.NewReader(body), h).want(t, http.StatusOK)
	out := streamed{contentType: r.header.Get("Content-Type")}
	add := func(stream string, data []byte) {
		switch stream {
		case api.StreamStdout:
			out.stdout = append(out.stdout, data...)
		case api.StreamStderr:
			out.stderr = append(out.stderr, data...)
		default:
			t.Fatalf("output on %q", stream)
		}
	}
	switch out.contentType {
	case frames.ContentType:
		fr := frames.NewReader(bytes.NewReader(r.body))
		for {
			k, p, err := fr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if out.final != "" {
				t.Fatalf("a %v frame after the final frame", k)
			}
			if k == frames.Final {
				out.final = string(p)
			} else {
				add(k.String(), p)
			}
		}
	case ndjson.ContentType:
		lines := strings.SplitAfter(string(r.body), "\n")
		if last := lines[len(lines)-1]; last != "" {
			t.Fatalf("the stream does not end with a newline: %q", last)
		}
		lines = lines[:len(lines)-1]
		var dec ndjson.Decoder
		for i, l := range lines {
			ev, err := dec.Decode([]byte(l[:len(l)-1]))
			if err != nil {
				t.Fatalf("line %q: %v", l, err)
			}
			if i == len(lines)-1 {
				out.final = l[:len(l)-1]
			} else {
				add(ev.Stream, []byte(ev.Data))
			}
		}
	default:
		t.Fatalf("content type %q", out.contentType)
	}
	return out
}

// asJSONText is what b reads as once carried by a JSON string: each byte of invalid
// UTF-8 becomes U+FFFD.
func asJSONText(b []byte) string {
	var s strings.Builder
	for len(b) > 0 {
		r, n := utf8.DecodeRune(b)
		if r == utf8.RuneError && n == 1 {
			s.WriteRune(utf8.RuneError)
		} else {
			s.Write(b[:n])
		}
		b = b[n:]
	}
	return s.String()
}

// TestExecStreamFormats streams the same commands through a real loopback server
// as NDJSON and as frames: both deliver the same output, frames as the raw bytes
// (NUL, invalid UTF-8 and megabytes included) and NDJSON as their JSON text, and
// end with the same final event.
func TestExecStreamFormats(t *testing.T) {
	t.Parallel()
	onSQLite(t, func(t *testing.T, st store.Store) {
		e := newEnv(t, st)
		dev := e.running(e.admin, "devhost")

		var blob bytes.Buffer
		for i := range 3 << 20 {
			switch {
			case i%1000 < 256:
				blob.WriteByte(byte(i % 1000))
			case i%7 == 0:
				blob.WriteString("é\u2028😀")
			default:
				blob.WriteByte('a' + byte(i%26))
			}
		}
		e.do(e.admin, "PUT", "/v1/sandboxes/"+dev.ID+"/files/content?path=blob", blob.Bytes()).want(t, http.StatusNoContent)

		for _, tc := range []struct {
			name           string
			req            api.ExecRequest
			stdout, stderr []byte
			final          string
		}{
			{"megabytes of any bytes", api.ExecRequest{Command: "cat blob; head -c 100000 blob >&2; exit 5"},
				blob.Bytes(), blob.Bytes()[:100000], `{"exitCode":5}`},
			{"NUL bytes", api.ExecRequest{Command: "head -c 70000 /dev/zero"}, make([]byte, 70000), nil, `{"exitCode":0}`},
			{"no output", api.ExecRequest{Command: "true"}, nil, nil, `{"exitCode":0}`},
			{"a program that does not exist", api.ExecRequest{Args: []string{"no-such-program"}},
				nil, []byte("no-such-program: command not found\n"), `{"exitCode":127}`},
		} {
			t.Run(tc.name, func(t *testing.T) {
				fr := e.execStreamed(t, dev.ID, frames.ContentType, tc.req)
				nd := e.execStreamed(t, dev.ID, "", tc.req)
				if fr.contentType != frames.ContentType || nd.contentType != ndjson.ContentType {
					t.Fatalf("content types %q and %q", fr.contentType, nd.contentType)
				}
				if !bytes.Equal(fr.stdout, tc.stdout) || !bytes.Equal(fr.stderr, tc.stderr) {
					t.Fatalf("frames carried %d and %d bytes, want %d and %d", len(fr.stdout), len(fr.stderr), len(tc.stdout), len(tc.stderr))
				}
				if string(nd.stdout) != asJSONText(fr.stdout) || string(nd.stderr) != asJSONText(fr.stderr) {
					t.Fatalf("NDJSON carried %d and %d bytes, frames %d and %d", len(nd.stdout), len(nd.stderr), len(fr.stdout), len(fr.stderr))
				}
				if fr.final != tc.final || nd.final != tc.final {
					t.Fatalf("final events %q (frames) and %q (NDJSON), want %q", fr.final, nd.final, tc.final)
				}
			})
		}

		// A pool without exec.stream answers the buffered fallback, in either format.
		ns := e.running(e.admin, "nostream")
		fr := e.execStreamed(t, ns.ID, frames.ContentType, api.ExecRequest{Command: "hello"})
		nd := e.execStreamed(t, ns.ID, "", api.ExecRequest{Command: "hello"})
		if fr.contentType != frames.ContentType || len(fr.stdout) == 0 || string(fr.stdout) != string(nd.stdout) ||
			string(fr.stderr) != string(nd.stderr) || fr.final != `{"exitCode":0}` || fr.final != nd.final {
			t.Fatalf("the fallback: frames %+v, NDJSON %+v", fr, nd)
		}

		// The request's Accept decides; without frames named, NDJSON as before.
		for accept, want := range map[string]string{
			"":                             ndjson.ContentType,
			"*/*":                          ndjson.ContentType,
			"application/x-ndjson":         ndjson.ContentType,
			"application/json":             ndjson.ContentType,
			frames.ContentType:             frames.ContentType,
			frames.ContentType + ";q=0":    ndjson.ContentType,
			frames.ContentType + ";q=nope": ndjson.ContentType,
			frames.ContentType + ", application/x-ndjson;q=0.5":      frames.ContentType,
			"application/x-ndjson, " + frames.ContentType + ";q=0.5": ndjson.ContentType,
			"text/html;q=0.9, " + frames.ContentType + ";q=0.2":      frames.ContentType,
			"APPLICATION/VND.DIFFERENTLY.EXEC-FRAMES":                frames.ContentType,
		} {
			if got := e.execStreamed(t, dev.ID, accept, api.ExecRequest{Command: "echo hi"}); got.contentType != want || string(got.stdout) != "hi\n" {
				t.Errorf("Accept %q: %q carrying %q", accept, got.contentType, got.stdout)
			}
		}
	})
}
