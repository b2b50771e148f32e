package client_test

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/client"
	"github.com/different-ai/differently/internal/frames"
)

// streamServer answers a streamed exec with write's output.
func streamServer(t *testing.T, write func(w http.ResponseWriter, r *http.Request)) *client.Client {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("stream") != "1" || r.Method != http.MethodPost {
			t.Errorf("stream request: %s %s", r.Method, r.URL)
		}
		w.Header().Set("Content-Type", "application/x-ndjson")
		write(w, r)
	}))
	t.Cleanup(srv.Close)
	c, err := client.New(srv.URL, "t")
	if err != nil {
		t.Fatal(err)
	}
	return c
}

type collected struct {
	events []api.ExecEvent
	errs   []error
}

func collect(c *client.Client, t *testing.T) collected {
	var out collected
	for ev, err := range c.ExecSandboxStream(t.Context(), "sbx_1", api.ExecRequest{Command: "x"}) {
		out.events = append(out.events, ev)
		out.errs = append(out.errs, err)
	}
	return out
}

func TestExecStreamWithoutFinalEvent(t *testing.T) {
	c := streamServer(t, func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"stream":"stdout","data":"partial\n"}`+"\n")
	})
	got := collect(c, t)
	if len(got.events) != 2 || got.errs[0] != nil || got.events[0].Data != "partial\n" ||
		!errors.Is(got.errs[1], client.ErrStreamIncomplete) {
		t.Fatalf("got %+v", got)
	}
}

func TestExecStreamOversizedLine(t *testing.T) {
	c := streamServer(t, func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `{"stream":"stdout","data":"%s"}`+"\n", strings.Repeat("a", api.MaxStreamLineBytes))
		io.WriteString(w, `{"exitCode":0}`+"\n")
	})
	got := collect(c, t)
	if len(got.events) != 1 || got.errs[0] == nil || !strings.Contains(got.errs[0].Error(), "over") {
		t.Fatalf("got %d events, errors %v", len(got.events), got.errs)
	}
}

func TestExecStreamErrorEvent(t *testing.T) {
	c := streamServer(t, func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"stream":"stderr","data":"oops"}`+"\n"+`{"error":"backend went away"}`+"\n")
	})
	got := collect(c, t)
	if len(got.events) != 2 || got.errs[0] != nil || got.events[1].Error != "backend went away" ||
		got.errs[1] == nil || !strings.Contains(got.errs[1].Error(), "backend went away") {
		t.Fatalf("got %+v", got)
	}
}

// TestExecStreamErrorEventCode: a final error event's code comes with the error, in
// either format, as a *StreamError that IsCode reads like an *APIError; a daemon
// that sends no code gives an empty one, never success.
func TestExecStreamErrorEventCode(t *testing.T) {
	const final = `{"error":"reading the adapter stream failed: unexpected EOF","code":"provider_unavailable"}`
	for name, c := range map[string]*client.Client{
		"ndjson": streamServer(t, func(w http.ResponseWriter, r *http.Request) {
			io.WriteString(w, `{"stream":"stdout","data":"par"}`+"\n"+final+"\n")
		}),
		"frames": framesServer(t, cat(frame(frames.Stdout, "par"), frame(frames.Final, final))),
	} {
		got := collect(c, t)
		var se *client.StreamError
		if len(got.events) != 2 || got.errs[0] != nil || got.events[0].Data != "par" || !errors.As(got.errs[1], &se) ||
			se.Code != api.CodeProviderUnavailable || se.Message != "reading the adapter stream failed: unexpected EOF" ||
			!client.IsCode(got.errs[1], api.CodeProviderUnavailable) || client.IsCode(got.errs[1], api.CodeInternal) {
			t.Fatalf("%s: got %+v", name, got)
		}
		if got.events[1].Code != api.CodeProviderUnavailable {
			t.Errorf("%s: the final event %+v lost its code", name, got.events[1])
		}
	}

	c := streamServer(t, func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"stream":"stdout","data":"par"}`+"\n"+`{"error":"old daemon"}`+"\n")
	})
	got := collect(c, t)
	var se *client.StreamError
	if len(got.errs) != 2 || !errors.As(got.errs[1], &se) || se.Code != "" || se.Message != "old daemon" ||
		got.errs[1].Error() != "differently: exec stream failed: old daemon" {
		t.Fatalf("without a code: %+v", got)
	}
}

func TestExecStreamBadJSONAndAPIError(t *testing.T) {
	c := streamServer(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "not json\n") })
	if got := collect(c, t); len(got.errs) != 1 || got.errs[0] == nil {
		t.Fatalf("bad json: %+v", got)
	}

	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusConflict)
		io.WriteString(w, `{"error":{"code":"invalid_state","message":"sandbox is stopped","details":{"state":"stopped"}}}`)
	}))
	defer srv.Close()
	c, _ = client.New(srv.URL, "t")
	got := collect(c, t)
	var apiErr *client.APIError
	if len(got.errs) != 1 || !errors.As(got.errs[0], &apiErr) || apiErr.Code != api.CodeInvalidState {
		t.Fatalf("refused stream: %+v", got)
	}
}

// TestExecStreamEarlyBreakCloses checks that leaving the loop early hangs up, which
// the daemon sees as a cancelled request (and kills the command).
func TestExecStreamEarlyBreakCloses(t *testing.T) {
	hungUp := make(chan struct{})
	c := streamServer(t, func(w http.ResponseWriter, r *http.Request) {
		defer close(hungUp)
		for i := 0; ; i++ {
			if _, err := fmt.Fprintf(w, `{"stream":"stdout","data":"%d\n"}`+"\n", i); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
				return
			default:
			}
		}
	})
	n := 0
	for ev, err := range c.ExecSandboxStream(t.Context(), "sbx_1", api.ExecRequest{Command: "yes"}) {
		if err != nil {
			t.Fatal(err)
		}
		if n++; n == 3 || ev.IsFinal() {
			break
		}
	}
	// The handler returns only once the client has closed the connection.
	select {
	case <-hungUp:
	case <-time.After(30 * time.Second):
		t.Fatal("the stream was not closed after the loop ended")
	}
}
