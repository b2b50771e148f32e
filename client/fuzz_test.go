package client_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"testing"
	"unicode/utf8"

	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/client"
	"github.com/different-ai/differently/internal/frames"
)

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// FuzzExecStream answers a streamed exec with arbitrary bytes (and, for some inputs,
// an error status) and ranges over ExecSandboxStream, stopping early after stopAfter events
// when it is not zero. The sequence never panics and never yields after a final
// event or an error; it ends with exactly one error unless the last event yielded is
// a final exit event; an event carrying Error comes with an error; a refused request
// yields a single *APIError with the status.
func FuzzExecStream(f *testing.F) {
	for _, s := range []string{
		"{\"stream\":\"stdout\",\"data\":\"hi\\n\"}\n{\"exitCode\":0}\n",
		"{\"stream\":\"stderr\",\"data\":\"e\"}\r\n{\"exitCode\":124,\"timedOut\":true}\r\n",
		"{\"exitCode\":0}\n{\"stream\":\"stdout\",\"data\":\"after the end\"}\n",
		"{\"stream\":\"stdout\",\"data\":\"cut\"}\n",
		"{\"error\":\"backend went away\"}\n",
		"{\"exitCode\":1,\"error\":\"both\"}\n",
		"  \t{\"exitCode\":0}  \n",
		"{}\nnull\n{\"exitCode\":0}",
		"{\"exitCode\":99999999999999999999}\n",
		"{\"exitCode\":\"0\"}\n",
		"{\"data\":\"\xff\xfe\"}\n{\"exitCode\":0}",
		"not json\n",
		"[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]\n",
		"\x00",
		"",
		`{"error":{"code":"invalid_request","message":"no"}}`,
		`{"error":{"code":"","message":""}}`,
	} {
		f.Add([]byte(s), uint8(0), uint8(0))
	}
	f.Add([]byte("{\"stream\":\"stdout\",\"data\":\"a\"}\n{\"exitCode\":0}"), uint8(1), uint8(0))
	f.Add([]byte(`{"error":{"code":"not_found","message":"gone"}}`), uint8(0), uint8(1))
	f.Add([]byte("<html>oops</html>"), uint8(0), uint8(3))

	f.Fuzz(func(t *testing.T, body []byte, stopAfter, statusSel uint8) {
		checkExecStream(t, "application/x-ndjson", body, stopAfter, statusSel)
	})
}

// FuzzExecStreamFrames is FuzzExecStream for a daemon answering in frames: the
// same invariants hold, and every output event's Data is valid UTF-8 whatever bytes
// its frame carried. The seed corpus is in testdata/fuzz/FuzzExecStreamFrames.
func FuzzExecStreamFrames(f *testing.F) {
	fr := func(k frames.Kind, p string) []byte { return frames.Append(nil, k, p) }
	f.Add(append(fr(frames.Stdout, "hi\n\xff"), fr(frames.Final, `{"exitCode":0}`)...), uint8(0), uint8(0))
	f.Add(append(fr(frames.Stderr, ""), fr(frames.Final, `{"error":"x"}`)...), uint8(1), uint8(0))
	f.Add(fr(frames.Final, `{"stream":"stdout"}`), uint8(0), uint8(0))
	f.Add([]byte{byte(frames.Stdout), 0xff, 0xff, 0xff, 0xff}, uint8(0), uint8(0))
	f.Fuzz(func(t *testing.T, body []byte, stopAfter, statusSel uint8) {
		checkExecStream(t, frames.ContentType, body, stopAfter, statusSel)
	})
}

// checkExecStream answers a streamed exec with body, as okType when status is 200,
// and ranges over ExecSandboxStream, checking the invariants FuzzExecStream states.
func checkExecStream(t *testing.T, okType string, body []byte, stopAfter, statusSel uint8) {
	statuses := []int{http.StatusOK, http.StatusNotFound, http.StatusBadRequest, http.StatusInternalServerError}
	status := statuses[int(statusSel)%len(statuses)]
	hc := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		ct := okType
		if status != http.StatusOK {
			ct = "application/json"
		}
		return &http.Response{
			StatusCode: status, Header: http.Header{"Content-Type": {ct}},
			Body: io.NopCloser(bytes.NewReader(body)), Request: r,
		}, nil
	})}
	c, err := client.New("http://daemon.invalid", "tok", client.WithHTTP(hc), client.WithRetry(1, 0, 0))
	if err != nil {
		t.Fatal(err)
	}
	var (
		events  int
		errs    int
		ended   bool // a final event or an error was yielded
		lastFin bool
	)
	for ev, err := range c.ExecSandboxStream(context.Background(), "sbx_1", api.ExecRequest{Command: "x"}) {
		if ended {
			t.Fatalf("yielded %+v, %v after the end", ev, err)
		}
		if err != nil {
			errs++
			ended = true
			if status != http.StatusOK {
				var ae *client.APIError
				if !errors.As(err, &ae) || ae.Status != status || events != 0 {
					t.Fatalf("status %d gave %v after %d events", status, err, events)
				}
			}
			continue
		}
		if ev.Error != "" {
			t.Fatalf("an event carrying Error came without an error: %+v", ev)
		}
		if !utf8.ValidString(ev.Data) {
			t.Fatalf("an event whose data is not UTF-8: %q", ev.Data)
		}
		events++
		lastFin = ev.IsFinal()
		if lastFin {
			ended = true
		}
		if stopAfter > 0 && events == int(stopAfter) {
			return
		}
	}
	if errs > 1 || (errs == 0) == !lastFin {
		t.Fatalf("%d errors, last event final: %v", errs, lastFin)
	}
}
