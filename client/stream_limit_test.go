package client_test

import (
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/client"
)

// TestExecStreamLineLimit: a line of exactly api.MaxStreamLineBytes is read; one byte
// more ends the stream with an error naming the limit, before any event of that line
// and without reading on to the final event.
func TestExecStreamLineLimit(t *testing.T) {
	const head, tail = `{"stream":"stdout","data":"`, `"}`
	line := func(n int) string { return head + strings.Repeat("x", n-len(head)-len(tail)) + tail }

	c := streamServer(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, line(api.MaxStreamLineBytes)+"\n"+`{"exitCode":0}`+"\n")
	})
	got := collect(c, t)
	if len(got.events) != 2 || got.errs[0] != nil || got.errs[1] != nil ||
		len(got.events[0].Data) != api.MaxStreamLineBytes-len(head)-len(tail) || !got.events[1].IsFinal() {
		t.Fatalf("a line at the limit: %d events, errors %v", len(got.events), got.errs)
	}

	c = streamServer(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, `{"stream":"stdout","data":"before"}`+"\n"+line(api.MaxStreamLineBytes+1)+"\n"+`{"exitCode":0}`+"\n")
	})
	got = collect(c, t)
	if len(got.events) != 2 || got.events[0].Data != "before" || got.errs[0] != nil || got.errs[1] == nil {
		t.Fatalf("a line over the limit: %d events, errors %v", len(got.events), got.errs)
	}
	if msg := got.errs[1].Error(); !strings.Contains(msg, "over "+strconv.Itoa(api.MaxStreamLineBytes)+" bytes") {
		t.Fatalf("the error does not name the limit: %v", msg)
	}
	if errors.Is(got.errs[1], client.ErrStreamIncomplete) {
		t.Fatalf("reported as a cut stream: %v", got.errs[1])
	}
}
