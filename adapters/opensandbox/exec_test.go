package opensandbox

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/adapters/opensandbox/ossfake"
	"github.com/different-ai/differently/api"
)

func running(t *testing.T, extra map[string]any) (*Adapter, *ossfake.Server, string) {
	t.Helper()
	a, srv := newAdapter(t, extra)
	inst, err := a.Create(t.Context(), request("sbx_exec", "inst_e"))
	if err != nil {
		t.Fatal(err)
	}
	return a, srv, inst.Ref
}

// execd sends output line by line without terminators; the adapter must give back
// exactly what the command wrote, in both framings.
func TestExecRebuildsOutput(t *testing.T) {
	cases := map[string]string{
		`printf 'no newline'`:           "no newline",
		`printf 'a\n\nb\n'`:             "a\n\nb\n",
		`printf '\n\n'`:                 "\n\n",
		`true`:                          "",
		`printf 'x\r\ny\n'`:             "x\ny\n", // CRLF becomes LF: execd splits on both
		`printf 'one\ntwo'; echo >&2 e`: "one\ntwo",
	}
	for _, sse := range []bool{false, true} {
		a, srv, ref := running(t, nil)
		srv.SetFaults(ossfake.Faults{SSE: sse})
		for cmd, want := range cases {
			res, err := a.Exec(t.Context(), ref, api.ExecRequest{Command: cmd})
			if err != nil {
				t.Fatalf("sse=%v %q: %v", sse, cmd, err)
			}
			if res.Stdout != want || res.ExitCode != 0 {
				t.Errorf("sse=%v %q: stdout %q exit %d, want %q", sse, cmd, res.Stdout, res.ExitCode, want)
			}
		}
	}
}

func TestExecStreamEmitsAsProduced(t *testing.T) {
	a, _, ref := running(t, nil)
	var events []api.ExecEvent
	st, err := a.ExecStream(t.Context(), ref, api.ExecRequest{Command: "echo a; echo b >&2; echo c; exit 4"},
		func(ev api.ExecEvent) error { events = append(events, ev); return nil })
	if err != nil || st.Code != 4 {
		t.Fatalf("stream: %+v, %v", st, err)
	}
	var out, errOut strings.Builder
	for _, ev := range events {
		if ev.Stream == api.StreamStderr {
			errOut.WriteString(ev.Data)
		} else {
			out.WriteString(ev.Data)
		}
	}
	if out.String() != "a\nc\n" || errOut.String() != "b\n" || len(events) < 3 {
		t.Fatalf("events %+v", events)
	}
}

func TestExecStreamCutIsAnError(t *testing.T) {
	a, srv, ref := running(t, nil)
	srv.SetFaults(ossfake.Faults{CutStream: 1})
	_, err := a.Exec(t.Context(), ref, api.ExecRequest{Command: "echo hi"})
	if !api.IsCode(err, api.CodeProviderUnavailable) {
		t.Fatalf("cut stream: %v, want provider_unavailable", err)
	}
	// The next command works again (the endpoint is looked up afresh).
	if res, err := a.Exec(t.Context(), ref, api.ExecRequest{Command: "echo hi"}); err != nil || res.Stdout != "hi\n" {
		t.Fatalf("after a cut: %+v, %v", res, err)
	}
}

func TestExecArgsAndStdinAreLiteral(t *testing.T) {
	a, _, ref := running(t, nil)
	res, err := a.Exec(t.Context(), ref, api.ExecRequest{Args: []string{"printf", "%s|", "it's", "$(id)", "`x`"}})
	if err != nil || res.Stdout != "it's|$(id)|`x`|" {
		t.Fatalf("args: %+v, %v", res, err)
	}
	res, err = a.Exec(t.Context(), ref, api.ExecRequest{Command: "wc -c; ls /tmp/.differently-stdin-* 2>/dev/null | wc -l", Stdin: "12345"})
	if err != nil || res.Stdout != "5\n0\n" {
		t.Fatalf("stdin (and its staged file removed): %+v, %v", res, err)
	}
}

func TestExecOnPausedIsInvalidState(t *testing.T) {
	a, _, ref := running(t, map[string]any{"runtime": "docker"})
	if err := a.Pause(t.Context(), ref); err != nil {
		t.Fatal(err)
	}
	if inst, err := a.Get(t.Context(), ref); err != nil || inst.State != adapters.StatePaused {
		t.Fatalf("get after pause: %+v, %v", inst, err)
	}
	if _, err := a.Exec(t.Context(), ref, api.ExecRequest{Command: "true"}); !api.IsCode(err, api.CodeInvalidState) {
		t.Fatalf("exec on paused: %v", err)
	}
	if err := a.Resume(t.Context(), ref); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Exec(t.Context(), ref, api.ExecRequest{Command: "true"}); err != nil {
		t.Fatalf("exec after resume: %v", err)
	}
}

func TestReadFileOverLimitFails(t *testing.T) {
	a, _, ref := running(t, nil)
	// A sparse file: the size is over the limit without writing 100 MiB.
	if _, err := a.Exec(t.Context(), ref, api.ExecRequest{Args: []string{"truncate", "-s", "104857601", "big"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.ReadFile(t.Context(), ref, "big"); !api.IsCode(err, api.CodePayloadTooLarge) {
		t.Fatalf("read of a 100 MiB + 1 byte file: %v, want payload_too_large", err)
	}
	if err := a.WriteFile(t.Context(), ref, "", nil); !api.IsCode(err, api.CodeInvalidRequest) {
		t.Fatalf("write to an empty path: %v", err)
	}
}

func TestExposePortRefusesHeaderEndpoints(t *testing.T) {
	a, _, ref := running(t, map[string]any{"ports": "signed", "portScheme": "https"})
	u, err := a.ExposePort(t.Context(), ref, 8080)
	if err != nil || !strings.HasPrefix(u, "https://") || !strings.Contains(u, "/8080/") {
		t.Fatalf("signed url: %q, %v", u, err)
	}
	b, _, ref2 := running(t, nil)
	if _, err := b.ExposePort(t.Context(), ref2, 8080); !api.IsCode(err, api.CodeUnsupportedOperation) {
		t.Fatalf("expose without ports: signed: %v", err)
	}
}

func TestReadEventsFramings(t *testing.T) {
	stream := ": comment\nevent: x\ndata: {\"type\":\"init\",\"text\":\"c1\"}\n\n" +
		"{\"type\":\"stdout\",\"text\":\"hi\"}\n\n" +
		"data: {\"type\":\"stdout\",\ndata: \"text\":\"multi\"}\n\n" +
		"{\"type\":\"error\",\"error\":{\"ename\":\"CommandExecError\",\"evalue\":\"3\"}}"
	var types []string
	err := readEvents(strings.NewReader(stream), func(ev execEvent) (bool, error) {
		types = append(types, ev.Type+":"+ev.Text)
		return false, nil
	})
	if err != nil || strings.Join(types, ",") != "init:c1,stdout:hi,stdout:multi,error:" {
		t.Fatalf("events %v, %v", types, err)
	}
}

// TestExecLongLines: a line of output longer than a line of execd's stream may be
// held is output like any other, in both framings: kept up to
// api.MaxExecOutputBytes with Truncated set beyond, never a failed exec.
func TestExecLongLines(t *testing.T) {
	const mib = api.MaxExecOutputBytes
	ctrl := strings.Repeat("\x01", 200_000) // escaped as \u0001, so its line is over 1 MiB
	tests := []struct {
		command        string
		exit           int
		stdout, stderr string
		truncated      bool
	}{
		{"head -c 1200000 /dev/zero | tr '\\0' a", 0, strings.Repeat("a", mib), "", true},
		{"head -c 1200000 /dev/zero | tr '\\0' b >&2; echo out; exit 3", 3, "out\n", strings.Repeat("b", mib), true},
		{"printf 'x\\n'; head -c 1200000 /dev/zero | tr '\\0' a; printf '\\ny'", 0, "x\n" + strings.Repeat("a", mib-2), "", true},
		{"head -c 200000 /dev/zero | tr '\\0' '\\1'; echo; echo end", 0, ctrl + "\nend\n", "", false},
	}
	for _, sse := range []bool{false, true} {
		a, srv, ref := running(t, nil)
		srv.SetFaults(ossfake.Faults{SSE: sse})
		for _, tt := range tests {
			res, err := a.Exec(t.Context(), ref, api.ExecRequest{Command: tt.command})
			if err != nil {
				t.Fatalf("sse=%v %s: %v", sse, tt.command, err)
			}
			if res.ExitCode != tt.exit || res.Truncated != tt.truncated || res.Stdout != tt.stdout || res.Stderr != tt.stderr {
				t.Errorf("sse=%v %s: exit %d truncated %v, stdout %.10q (%d bytes), stderr %.10q (%d bytes)", sse, tt.command,
					res.ExitCode, res.Truncated, res.Stdout, len(res.Stdout), res.Stderr, len(res.Stderr))
			}
		}
	}
}

// TestExecStreamLongLine: a streamed line longer than a line of execd's stream may
// be held comes whole, in events of at most maxLineBytes that never cut a
// character.
func TestExecStreamLongLine(t *testing.T) {
	a, _, ref := running(t, nil)
	var out, errOut strings.Builder
	events := 0
	st, err := a.ExecStream(t.Context(), ref, api.ExecRequest{Command: "printf x; yes é | head -n 600000 | tr -d '\\n'; echo; echo end >&2"},
		func(ev api.ExecEvent) error {
			if len(ev.Data) > maxLineBytes || !utf8.ValidString(ev.Data) {
				t.Errorf("an event of %d bytes, valid UTF-8 %v", len(ev.Data), utf8.ValidString(ev.Data))
			}
			if ev.Stream == api.StreamStderr {
				errOut.WriteString(ev.Data)
			} else {
				out.WriteString(ev.Data)
				events++
			}
			return nil
		})
	if err != nil || st.Code != 0 {
		t.Fatalf("stream: %+v, %v", st, err)
	}
	if want := "x" + strings.Repeat("é", 600_000) + "\n"; out.String() != want || errOut.String() != "end\n" || events < 2 {
		t.Fatalf("%d bytes of stdout in %d events, stderr %q; want %d bytes in 2 or more", out.Len(), events, errOut.String(), len(want))
	}
}
