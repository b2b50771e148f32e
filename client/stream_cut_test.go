package client_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"

	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/client"
	"github.com/different-ai/differently/internal/frames"
)

// cutStream answers a streamed exec with a 200, a chunked body holding first, and
// then, once the caller has the first event (it closes cut), drops the connection
// without the body's end: with a TCP reset when rst is set, else by closing it.
func cutStream(t *testing.T, ctype string, first []byte, rst bool, cut <-chan struct{}) *client.Client {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		conn, buf, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		defer conn.Close()
		fmt.Fprintf(buf, "HTTP/1.1 200 OK\r\nContent-Type: %s\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n", ctype, len(first), first)
		if err := buf.Flush(); err != nil {
			t.Error(err)
			return
		}
		select {
		case <-cut:
		case <-t.Context().Done():
		}
		if rst {
			// Closing with a zero linger sends a reset instead of the orderly end.
			_ = conn.(*net.TCPConn).SetLinger(0)
		}
	}))
	t.Cleanup(srv.Close)
	c, err := client.New(srv.URL, "t")
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestExecStreamCutConnection: once the answer is a 200, a stream whose connection is
// closed or reset before the final event ends with ErrStreamIncomplete, in either
// format, with the read's error still reachable; "cut inside a frame" only when it
// was.
func TestExecStreamCutConnection(t *testing.T) {
	line := []byte(`{"stream":"stdout","data":"partial"}` + "\n")
	whole := frame(frames.Stdout, "partial")
	for _, tc := range []struct {
		name    string
		ctype   string
		first   []byte
		rst     bool
		cause   error
		inFrame bool
	}{
		{"ndjson closed", "application/x-ndjson", line, false, io.ErrUnexpectedEOF, false},
		{"ndjson reset", "application/x-ndjson", line, true, syscall.ECONNRESET, false},
		{"frames closed between frames", frames.ContentType, whole, false, io.ErrUnexpectedEOF, false},
		{"frames reset between frames", frames.ContentType, whole, true, syscall.ECONNRESET, false},
		{"frames closed inside a frame", frames.ContentType, cat(whole, frame(frames.Final, `{"exitCode":0}`)[:8]), false, io.ErrUnexpectedEOF, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cut := make(chan struct{})
			c := cutStream(t, tc.ctype, tc.first, tc.rst, cut)
			var got collected
			for ev, err := range c.ExecSandboxStream(t.Context(), "sbx_1", api.ExecRequest{Command: "x"}) {
				if len(got.events) == 0 {
					close(cut)
				}
				got.events = append(got.events, ev)
				got.errs = append(got.errs, err)
			}
			if len(got.events) != 2 || got.errs[0] != nil || got.events[0].Data != "partial" {
				t.Fatalf("got %+v", got)
			}
			err := got.errs[1]
			if !errors.Is(err, client.ErrStreamIncomplete) || !errors.Is(err, tc.cause) {
				t.Fatalf("error %v, want ErrStreamIncomplete and %v", err, tc.cause)
			}
			if strings.Contains(err.Error(), "cut inside a frame") != tc.inFrame {
				t.Fatalf("error %q: inside a frame is %v", err, tc.inFrame)
			}
		})
	}
}

// TestExecStreamCancelledIsNotCut: the caller's own cancellation ends the stream with
// the context's error, not ErrStreamIncomplete.
func TestExecStreamCancelledIsNotCut(t *testing.T) {
	for name, c := range map[string]*client.Client{
		"ndjson": streamServer(t, func(w http.ResponseWriter, r *http.Request) {
			io.WriteString(w, `{"stream":"stdout","data":"partial"}`+"\n")
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		}),
		"frames": streamServer(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", frames.ContentType)
			w.Write(frame(frames.Stdout, "partial"))
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		}),
	} {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			var errs []error
			for _, err := range c.ExecSandboxStream(ctx, "sbx_1", api.ExecRequest{Command: "x"}) {
				cancel()
				errs = append(errs, err)
			}
			if len(errs) != 2 || errs[0] != nil || !errors.Is(errs[1], context.Canceled) || errors.Is(errs[1], client.ErrStreamIncomplete) {
				t.Fatalf("errors %v", errs)
			}
		})
	}
}
