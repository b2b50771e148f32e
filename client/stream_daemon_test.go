package client_test

import (
	"bytes"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/client"
)

// TestExecStreamThroughDaemon streams from a devhost sandbox through the whole path
// (devhost's reader, the daemon's framed writer, HTTP, the client's decoder): a small
// output, a whole line or a partial one, must arrive while the command still runs
// and waits for the test to have seen it, and megabytes of arbitrary bytes
// must arrive whole, in order, with each byte of invalid UTF-8 as U+FFFD.
func TestExecStreamThroughDaemon(t *testing.T) {
	dd := startDaemon(t)
	c := dd.client(t)
	ctx := testCtx(t)
	sb, err := c.CreateSandbox(ctx, client.SandboxCreate{Placement: devhost()}, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitForState(ctx, sb.Id, client.Running); err != nil {
		t.Fatal(err)
	}

	// The command waits on a FIFO after its first line; the test opens it only once
	// that line has arrived, so held-back output would hang until the deadline.
	var got []string
	for ev, err := range c.ExecSandboxStream(ctx, sb.Id, api.ExecRequest{Command: `rm -f go; mkfifo go; echo first; read x < go; echo "then $x"`}) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, ev.Data)
		if ev.Data == "first\n" {
			if r, err := c.ExecSandbox(ctx, sb.Id, api.ExecRequest{Command: "echo ack > go"}); err != nil || r.ExitCode != 0 {
				t.Fatalf("unblock: %+v, %v", r, err)
			}
		}
	}
	if strings.Join(got, "|") != "first\n|then ack\n|" {
		t.Fatalf("events %q", got)
	}

	// The same with a partial line: bytes without a newline are output too, and must
	// not wait for one, nor for a buffer to fill.
	got = nil
	for ev, err := range c.ExecSandboxStream(ctx, sb.Id, api.ExecRequest{Command: `rm -f go; mkfifo go; printf 'partial'; read x < go; echo " $x"`}) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, ev.Data)
		if ev.Data == "partial" {
			if r, err := c.ExecSandbox(ctx, sb.Id, api.ExecRequest{Command: "echo ack > go"}); err != nil || r.ExitCode != 0 {
				t.Fatalf("unblock: %+v, %v", r, err)
			}
		}
	}
	if strings.Join(got, "|") != "partial| ack\n|" {
		t.Fatalf("events %q", got)
	}

	var content bytes.Buffer
	for i := range 3 << 20 {
		switch {
		case i%1000 < 256:
			content.WriteByte(byte(i % 1000))
		case i%7 == 0:
			content.WriteString("é\u2028😀")
		default:
			content.WriteByte('a' + byte(i%26))
		}
	}
	if err := c.WriteSandboxFile(ctx, sb.Id, "blob", content.Bytes()); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	for ev, err := range c.ExecSandboxStream(ctx, sb.Id, api.ExecRequest{Command: "cat blob; cat blob >&2"}) {
		if err != nil {
			t.Fatal(err)
		}
		if len(ev.Data) > 1<<20 {
			t.Fatalf("an event of %d bytes", len(ev.Data))
		}
		if ev.Stream == api.StreamStdout {
			out.WriteString(ev.Data)
		}
	}
	if want := jsonText(content.Bytes()); out.String() != want {
		t.Fatalf("streamed %d bytes, want %d", out.Len(), len(want))
	}
}

// jsonText is what a JSON string carrying b decodes to: U+FFFD for each byte of
// invalid UTF-8.
func jsonText(b []byte) string {
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
