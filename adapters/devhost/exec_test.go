package devhost

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"unicode/utf8"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/api"
)

func TestExec(t *testing.T) {
	t.Setenv("DEVHOST_DAEMON_SECRET", "hunter2")
	a := newAdapter(t)
	ctx := context.Background()
	create(t, a, "sbx_e", map[string]string{"INST": "instance", "SHARED": "from-instance"})
	if err := os.MkdirAll(filepath.Join(a.fsDir("sbx_e"), "sub", "dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	home := a.fsDir("sbx_e")

	tests := []struct {
		name       string
		req        api.ExecRequest
		wantCode   int
		wantStdout string
		wantStderr string
	}{
		{"command", api.ExecRequest{Command: "echo hello; echo oops >&2"}, 0, "hello\n", "oops\n"},
		{"args", api.ExecRequest{Args: []string{"echo", "a b", "$HOME"}}, 0, "a b $HOME\n", ""},
		{"args absolute", api.ExecRequest{Args: []string{"/bin/sh", "-c", "echo $0", "x"}}, 0, "x\n", ""},
		{"non-zero exit", api.ExecRequest{Command: "exit 3"}, 3, "", ""},
		{"killed by signal", api.ExecRequest{Command: "kill -TERM $$"}, 128 + 15, "", ""},
		{"command not found", api.ExecRequest{Args: []string{"no-such-program-xyz"}}, 127, "", "no-such-program-xyz: command not found\n"},
		{"instance env", api.ExecRequest{Command: `echo "$INST $SHARED"`}, 0, "instance from-instance\n", ""},
		{"request env overrides", api.ExecRequest{Command: `echo "$INST $SHARED"`, Env: map[string]string{"SHARED": "from-request"}}, 0, "instance from-request\n", ""},
		{"home and default cwd", api.ExecRequest{Command: `echo "$HOME"; pwd -P`}, 0, home + "\n" + home + "\n", ""},
		{"cwd", api.ExecRequest{Command: "pwd -P", Cwd: "sub/dir"}, 0, filepath.Join(home, "sub", "dir") + "\n", ""},
		{"cwd cleaned", api.ExecRequest{Command: "pwd -P", Cwd: "sub/../sub/./dir/"}, 0, filepath.Join(home, "sub", "dir") + "\n", ""},
		{"stdin", api.ExecRequest{Command: "tr a-z A-Z", Stdin: "shout\n"}, 0, "SHOUT\n", ""},
		{"stdin unread", api.ExecRequest{Command: "echo ignored", Stdin: strings.Repeat("x", 1<<20)}, 0, "ignored\n", ""},
		{"no stdin is empty", api.ExecRequest{Command: "wc -c"}, 0, "0\n", ""},
		{"background child does not hold exec", api.ExecRequest{Command: "sleep 30 & echo started"}, 0, "started\n", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := a.Exec(ctx, "sbx_e", tt.req)
			if err != nil {
				t.Fatalf("Exec: %v", err)
			}
			if res.ExitCode != tt.wantCode || strings.TrimLeft(res.Stdout, " ") != tt.wantStdout || res.Stderr != tt.wantStderr ||
				res.TimedOut || res.Truncated {
				t.Fatalf("Exec = %+v\nwant code %d stdout %q stderr %q", res, tt.wantCode, tt.wantStdout, tt.wantStderr)
			}
		})
	}
	if n := a.procs.running("sbx_e"); n != 0 {
		t.Fatalf("%d commands still tracked", n)
	}
}

func TestExecEnvironmentIsMinimal(t *testing.T) {
	t.Setenv("DEVHOST_DAEMON_SECRET", "hunter2")
	a := newAdapter(t)
	create(t, a, "sbx_env", map[string]string{"MINE": "1"})
	res, err := a.Exec(context.Background(), "sbx_env", api.ExecRequest{Args: []string{"env"}})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(res.Stdout, "DEVHOST_DAEMON_SECRET") || strings.Contains(res.Stdout, "hunter2") {
		t.Fatalf("daemon environment leaked into the sandbox:\n%s", res.Stdout)
	}
	names := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(res.Stdout), "\n") {
		name, _, _ := strings.Cut(line, "=")
		names[name] = true
	}
	// The marker finds the command's processes for Stop and Delete.
	for _, want := range []string{"PATH", "HOME", "MINE", markerVar} {
		if !names[want] {
			t.Fatalf("env lacks %s:\n%s", want, res.Stdout)
		}
	}
	if len(names) != 4 {
		t.Fatalf("env holds more than PATH, HOME, the marker and the instance env:\n%s", res.Stdout)
	}
}

func TestExecLooksUpArgsInSandboxPATH(t *testing.T) {
	a := newAdapter(t)
	ctx := context.Background()
	create(t, a, "sbx_p", nil)
	bin := filepath.Join(a.fsDir("sbx_p"), "bin")
	if err := a.WriteFile(ctx, "sbx_p", "bin/hello-devhost", []byte("#!/bin/sh\necho hi from $0\n")); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(bin, "hello-devhost"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := a.WriteFile(ctx, "sbx_p", "bin/not-exec", []byte("#!/bin/sh\n")); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		req  api.ExecRequest
		code int
		out  string
	}{
		{"request PATH", api.ExecRequest{Args: []string{"hello-devhost"}, Env: map[string]string{"PATH": bin + ":/bin:/usr/bin"}}, 0, "hi from " + filepath.Join(bin, "hello-devhost") + "\n"},
		{"not on PATH", api.ExecRequest{Args: []string{"hello-devhost"}}, 127, ""},
		{"relative PATH entries are ignored", api.ExecRequest{Args: []string{"hello-devhost"}, Env: map[string]string{"PATH": "bin"}}, 127, ""},
		{"relative with slash", api.ExecRequest{Args: []string{"./hello-devhost"}, Cwd: "bin"}, 0, "hi from " + filepath.Join(bin, "hello-devhost") + "\n"},
		{"not executable", api.ExecRequest{Args: []string{"bin/not-exec"}}, 126, ""},
		{"missing with slash", api.ExecRequest{Args: []string{"bin/missing"}}, 127, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := a.Exec(ctx, "sbx_p", tt.req)
			if err != nil {
				t.Fatal(err)
			}
			if res.ExitCode != tt.code || res.Stdout != tt.out {
				t.Fatalf("Exec = %+v, want code %d stdout %q", res, tt.code, tt.out)
			}
		})
	}
}

func TestExecRejects(t *testing.T) {
	a := newAdapter(t)
	ctx := context.Background()
	create(t, a, "sbx_x", nil)
	if err := a.WriteFile(ctx, "sbx_x", "file", nil); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc", filepath.Join(a.fsDir("sbx_x"), "etc")); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		ref  string
		req  api.ExecRequest
		code api.Code
	}{
		{"missing instance", "sbx_none", api.ExecRequest{Command: "true"}, api.CodeNotFound},
		{"timeout over maximum", "sbx_x", api.ExecRequest{Command: "true", TimeoutSeconds: api.MaxExecTimeoutSeconds + 1}, api.CodeInvalidRequest},
		{"negative timeout", "sbx_x", api.ExecRequest{Command: "true", TimeoutSeconds: -1}, api.CodeInvalidRequest},
		{"nothing to run", "sbx_x", api.ExecRequest{}, api.CodeInvalidRequest},
		{"command and args", "sbx_x", api.ExecRequest{Command: "true", Args: []string{"true"}}, api.CodeInvalidRequest},
		{"cwd absolute", "sbx_x", api.ExecRequest{Command: "true", Cwd: "/etc"}, api.CodeInvalidRequest},
		{"cwd parent", "sbx_x", api.ExecRequest{Command: "true", Cwd: "../"}, api.CodeInvalidRequest},
		{"cwd escaping symlink", "sbx_x", api.ExecRequest{Command: "true", Cwd: "etc"}, api.CodeInvalidRequest},
		{"cwd missing", "sbx_x", api.ExecRequest{Command: "true", Cwd: "nope"}, api.CodeInvalidRequest},
		{"cwd is a file", "sbx_x", api.ExecRequest{Command: "true", Cwd: "file"}, api.CodeInvalidRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := a.Exec(ctx, tt.ref, tt.req)
			wantCode(t, err, tt.code)
		})
	}
}

func TestExecTimeout(t *testing.T) {
	a := newAdapter(t)
	create(t, a, "sbx_t", nil)
	// The grandchild sleep shares the group, so it must die too or the pipes stay open.
	res, err := a.Exec(context.Background(), "sbx_t", api.ExecRequest{Command: "echo before; sleep 30; echo after", TimeoutSeconds: 1})
	if err != nil {
		t.Fatal(err)
	}
	if !res.TimedOut || res.ExitCode != api.TimeoutExitCode || res.Stdout != "before\n" {
		t.Fatalf("Exec = %+v, want a timeout with the output so far", res)
	}
}

func TestExecTruncatesOutput(t *testing.T) {
	a := newAdapter(t)
	create(t, a, "sbx_big", nil)
	res, err := a.Exec(context.Background(), "sbx_big", api.ExecRequest{
		Command: `head -c 2000000 /dev/zero | tr '\0' a; echo small >&2`,
	})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Truncated || len(res.Stdout) != api.MaxExecOutputBytes || strings.Trim(res.Stdout, "a") != "" ||
		res.Stderr != "small\n" || res.ExitCode != 0 {
		t.Fatalf("Exec: truncated=%v stdout=%d bytes stderr=%q code=%d", res.Truncated, len(res.Stdout), res.Stderr, res.ExitCode)
	}
}

// TestExecStreamOrder makes the command wait for the test between writes (through a
// FIFO), so the order of events across stdout and stderr is determined, and so the
// test proves output arrives while the command still runs.
func TestExecStreamOrder(t *testing.T) {
	a := newAdapter(t)
	ctx := context.Background()
	create(t, a, "sbx_st", nil)
	// One FIFO per step: reusing one would let the second read open while the first
	// write is still open and see end-of-file instead of waiting.
	dir := a.fsDir("sbx_st")
	cmd := `mkfifo go1 go2; echo e1 >&2; read x < go1; echo "o1 $x"; read x < go2; echo "e2 $x" >&2; exit 7`

	var events []api.ExecEvent
	var inEmit atomic.Int32
	st, err := a.ExecStream(ctx, "sbx_st", api.ExecRequest{Command: cmd}, func(ev api.ExecEvent) error {
		if inEmit.Add(1) != 1 {
			t.Error("emit called concurrently")
		}
		defer inEmit.Add(-1)
		events = append(events, ev)
		switch ev.Data { // each write blocks until the command opens the FIFO
		case "e1\n":
			return os.WriteFile(filepath.Join(dir, "go1"), []byte("ack\n"), 0o600)
		case "o1 ack\n":
			return os.WriteFile(filepath.Join(dir, "go2"), []byte("ack\n"), 0o600)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []api.ExecEvent{
		{Stream: api.StreamStderr, Data: "e1\n"},
		{Stream: api.StreamStdout, Data: "o1 ack\n"},
		{Stream: api.StreamStderr, Data: "e2 ack\n"},
	}
	if st.Code != 7 || st.TimedOut || len(events) != len(want) {
		t.Fatalf("ExecStream = %+v, events %+v", st, events)
	}
	for i := range want {
		if events[i] != want[i] {
			t.Fatalf("event %d = %+v, want %+v", i, events[i], want[i])
		}
	}
}

func TestExecStreamLargeAndUTF8(t *testing.T) {
	a := newAdapter(t)
	ctx := context.Background()
	create(t, a, "sbx_u", nil)
	// One ASCII byte first puts every two-byte rune at an odd offset, so reads into
	// buffers of even sizes would split them were it not for the hold-back.
	text := "x" + strings.Repeat("é", 200000)
	if err := a.WriteFile(ctx, "sbx_u", "t", []byte(text)); err != nil {
		t.Fatal(err)
	}
	var got strings.Builder
	n := 0
	st, err := a.ExecStream(ctx, "sbx_u", api.ExecRequest{Command: "cat t"}, func(ev api.ExecEvent) error {
		if !utf8.ValidString(ev.Data) {
			t.Errorf("event %d splits a character", n)
		}
		if len(ev.Data) > maxRead {
			t.Errorf("event %d is %d bytes", n, len(ev.Data))
		}
		n++
		got.WriteString(ev.Data)
		return nil
	})
	if err != nil || st.Code != 0 {
		t.Fatalf("ExecStream = %+v, %v", st, err)
	}
	if got.String() != text || n < 2 {
		t.Fatalf("streamed %d bytes in %d events, want %d bytes in several", got.Len(), n, len(text))
	}
}

func TestExecStreamTimeout(t *testing.T) {
	a := newAdapter(t)
	create(t, a, "sbx_st2", nil)
	st, err := a.ExecStream(context.Background(), "sbx_st2", api.ExecRequest{Command: "sleep 30", TimeoutSeconds: 1},
		func(api.ExecEvent) error { return nil })
	if err != nil || !st.TimedOut || st.Code != api.TimeoutExitCode {
		t.Fatalf("ExecStream = %+v, %v", st, err)
	}
}

// interrupt runs a command that announces itself and then would sleep for 30 s, and
// lets the test interfere once the announcement arrives; the call must then end
// promptly (a hang would show as a 30 s test).
func interrupt(t *testing.T, a *Adapter, ctx context.Context, ref string, onStart func() error) (adapters.ExitStatus, error) {
	t.Helper()
	return a.ExecStream(ctx, ref, api.ExecRequest{Command: "echo started; sleep 30; echo finished"}, func(ev api.ExecEvent) error {
		if ev.Data == "finished\n" {
			t.Error("the command was not killed")
		}
		if ev.Data == "started\n" {
			return onStart()
		}
		return nil
	})
}

func TestExecStreamInterrupted(t *testing.T) {
	boom := errors.New("client went away")
	tests := []struct {
		name  string
		check func(t *testing.T, a *Adapter, ref string)
	}{
		{"emit error", func(t *testing.T, a *Adapter, ref string) {
			_, err := interrupt(t, a, context.Background(), ref, func() error { return boom })
			if !errors.Is(err, boom) {
				t.Fatalf("ExecStream = %v, want the emit error", err)
			}
		}},
		{"context cancelled", func(t *testing.T, a *Adapter, ref string) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			_, err := interrupt(t, a, ctx, ref, func() error { cancel(); return nil })
			if !errors.Is(err, context.Canceled) || api.AsError(err) == nil {
				t.Fatalf("ExecStream = %v, want context.Canceled as an api error", err)
			}
		}},
		{"stop", func(t *testing.T, a *Adapter, ref string) {
			_, err := interrupt(t, a, context.Background(), ref, func() error { return a.Stop(context.Background(), ref) })
			wantCode(t, err, api.CodeInvalidState)
		}},
		{"delete", func(t *testing.T, a *Adapter, ref string) {
			_, err := interrupt(t, a, context.Background(), ref, func() error { return a.Delete(context.Background(), ref) })
			wantCode(t, err, api.CodeNotFound)
			if _, err := os.Stat(a.sandboxDir(ref)); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("sandbox directory survived Delete: %v", err)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := newAdapter(t)
			create(t, a, "sbx_i", nil)
			tt.check(t, a, "sbx_i")
			if n := a.procs.running("sbx_i"); n != 0 {
				t.Fatalf("%d commands still tracked", n)
			}
		})
	}
}

func TestExecContextCancelledSync(t *testing.T) {
	a := newAdapter(t)
	create(t, a, "sbx_c", nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := a.Exec(ctx, "sbx_c", api.ExecRequest{Command: "true"})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Exec = %v", err)
	}
}

// A process that leaves the command's process group (setsid) and keeps the output
// pipes open must not hold Exec beyond the grace period.
func TestExecEscapedHolderDoesNotHang(t *testing.T) {
	if _, err := os.Stat("/usr/bin/setsid"); err != nil {
		t.Skip("setsid not available")
	}
	a := newAdapter(t)
	create(t, a, "sbx_h", nil)
	res, err := a.Exec(context.Background(), "sbx_h", api.ExecRequest{
		Command: "/usr/bin/setsid sh -c 'echo $$ > holder.pid; exec sleep 30' & while [ ! -s holder.pid ]; do :; done; echo done",
	})
	if err != nil || res.ExitCode != 0 || res.Stdout != "done\n" {
		t.Fatalf("Exec = %+v, %v", res, err)
	}
	// Clean up the escaped sleeper, which the adapter deliberately does not track.
	if b, err := a.ReadFile(context.Background(), "sbx_h", "holder.pid"); err == nil {
		var pid int
		for _, c := range strings.TrimSpace(string(b)) {
			pid = pid*10 + int(c-'0')
		}
		if p, err := os.FindProcess(pid); err == nil && pid > 1 {
			_ = p.Kill()
		}
	}
}

func TestSplitUTF8(t *testing.T) {
	tests := []struct{ in, whole, rest string }{
		{"", "", ""},
		{"abc", "abc", ""},
		{"aé", "aé", ""},
		{"a\xc3", "a", "\xc3"},
		{"a\xe2\x82", "a", "\xe2\x82"},
		{"a\xe2\x82\xac", "a\xe2\x82\xac", ""},
		{"a\xf0\x9f\x98", "a", "\xf0\x9f\x98"},
		{"a\xff", "a\xff", ""}, // invalid, not incomplete: passed on
		{"\x80\x80\x80\x80", "\x80\x80\x80\x80", ""},
	}
	for _, tt := range tests {
		whole, rest := splitUTF8([]byte(tt.in))
		if string(whole) != tt.whole || string(rest) != tt.rest {
			t.Errorf("splitUTF8(%q) = %q, %q; want %q, %q", tt.in, whole, rest, tt.whole, tt.rest)
		}
	}
}

// TestReadPipeBuffers checks readPipe's two-buffer protocol: a chunk's data stays
// intact while the next chunk is read, buffers grow after a read fills them and
// never past maxRead, and every byte arrives once, in order.
func TestReadPipeBuffers(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	content := make([]byte, 5*maxRead+12345)
	for i := range content {
		content[i] = byte(i % 251)
	}
	// A full first buffer's worth is in the pipe before reading starts (pipes hold
	// 64 KiB), so the first read fills it.
	if _, err := w.Write(content[:minRead]); err != nil {
		t.Fatal(err)
	}
	go func() {
		_, _ = w.Write(content[minRead:])
		_ = w.Close()
	}()
	ch := make(chan chunk)
	go readPipe(r, api.StreamStdout, ch)

	var got []byte
	next := func() chunk {
		c := <-ch
		if !c.eof && (c.stream != api.StreamStdout || len(c.data) == 0 || len(c.data) > maxRead) {
			t.Fatalf("chunk of %d bytes on %q", len(c.data), c.stream)
		}
		return c
	}
	first := next()
	if len(first.data) != minRead {
		t.Fatalf("first chunk %d bytes, want %d", len(first.data), minRead)
	}
	keep := bytes.Clone(first.data)
	// Hold the first chunk while the second is read: it must not be overwritten.
	second := next()
	if !bytes.Equal(first.data, keep) {
		t.Fatal("the first chunk changed while the second was read")
	}
	got = append(append(got, first.data...), second.data...)
	first.release()
	second.release()
	largest := 0
	for {
		c := next()
		if c.eof {
			break
		}
		largest = max(largest, len(c.data))
		got = append(got, c.data...)
		c.release()
	}
	if !bytes.Equal(got, content) {
		t.Fatalf("read %d bytes, want %d, or not the same", len(got), len(content))
	}
	t.Logf("largest chunk after the first two: %d bytes", largest)
}

// ExecStdin: a conversation over stdin and stdout, end of file when the channel
// closes, a command that ends with stdin open, and one that closes its stdin while
// its caller still sends.
func TestExecStdin(t *testing.T) {
	a := newAdapter(t)
	ctx := context.Background()
	create(t, a, "sbx_in", nil)
	dir := a.fsDir("sbx_in")

	t.Run("conversation", func(t *testing.T) {
		stdin := make(chan []byte, 1)
		stdin <- []byte("a\n")
		var out []string
		st, err := a.ExecStdin(ctx, "sbx_in", api.ExecRequest{Command: `while read l; do echo "got $l"; done; echo bye`}, stdin,
			func(stream string, data []byte) error {
				out = append(out, stream+":"+string(data))
				switch string(data) {
				case "got a\n":
					stdin <- []byte("b\n")
				case "got b\n":
					close(stdin) // end of file: the loop ends
				}
				return nil
			})
		want := []string{"stdout:got a\n", "stdout:got b\n", "stdout:bye\n"}
		if err != nil || st.Code != 0 || strings.Join(out, "|") != strings.Join(want, "|") {
			t.Fatalf("ExecStdin = %+v, %v; output %q, want %q", st, err, out, want)
		}
	})

	t.Run("ends with stdin open", func(t *testing.T) {
		stdin := make(chan []byte, 1)
		stdin <- []byte("first\nsecond\n")
		var out bytes.Buffer
		st, err := a.ExecStdin(ctx, "sbx_in", api.ExecRequest{Command: "head -n1; exit 4"}, stdin,
			func(_ string, data []byte) error { out.Write(data); return nil })
		if err != nil || st.Code != 4 || out.String() != "first\n" {
			t.Fatalf("ExecStdin = %+v, %v; output %q", st, err, out.String())
		}
	})

	t.Run("the command closes its stdin", func(t *testing.T) {
		stdin := make(chan []byte) // unbuffered: each send waits for the adapter
		var out bytes.Buffer
		st, err := a.ExecStdin(ctx, "sbx_in", api.ExecRequest{Command: `mkfifo go; exec 0<&-; echo closed; read x < go; echo "done $x"`}, stdin,
			func(_ string, data []byte) error {
				out.Write(data)
				if string(data) == "closed\n" {
					// The command waits on the FIFO: these are received and dropped.
					for range 3 {
						stdin <- bytes.Repeat([]byte("x"), 1<<16)
					}
					return os.WriteFile(filepath.Join(dir, "go"), []byte("ok\n"), 0o600)
				}
				return nil
			})
		if err != nil || st.Code != 0 || out.String() != "closed\ndone ok\n" {
			t.Fatalf("ExecStdin = %+v, %v; output %q", st, err, out.String())
		}
	})

	t.Run("stdin up front as well", func(t *testing.T) {
		_, err := a.ExecStdin(ctx, "sbx_in", api.ExecRequest{Command: "cat", Stdin: "x"}, make(chan []byte),
			func(string, []byte) error { return nil })
		if !api.IsCode(err, api.CodeInvalidRequest) {
			t.Fatalf("err = %v, want invalid_request", err)
		}
	})
}

// ExecPTY: the command sees a terminal of the size asked for, reads typed keys,
// follows a resize, and ends the exec with its own exit.
func TestExecPTY(t *testing.T) {
	a := newAdapter(t)
	ctx := context.Background()
	create(t, a, "sbx_pty", nil)

	input := make(chan []byte, 1)
	resize := make(chan adapters.TermSize, 1)
	var out strings.Builder
	step := 0
	cmd := `test -t 0 && test -t 1 && echo on-a-tty; stty size; read -r line; echo "got $line"; read -r _; stty size; exit 5`
	st, err := a.ExecPTY(ctx, "sbx_pty", api.ExecRequest{Command: cmd}, adapters.TermSize{Cols: 100, Rows: 30}, input, resize,
		func(stream string, data []byte) error {
			if stream != api.StreamStdout {
				t.Errorf("output on %s, want stdout", stream)
			}
			out.Write(data)
			switch {
			case step == 0 && strings.Contains(out.String(), "30 100"):
				step++
				input <- []byte("hello\r") // Enter, as a terminal sends it
			case step == 1 && strings.Contains(out.String(), "got hello"):
				step++
				resize <- adapters.TermSize{Cols: 120, Rows: 40}
				// The resize is applied before the next key reaches the command.
				input <- []byte("\r")
			}
			return nil
		})
	if err != nil {
		t.Fatal(err)
	}
	got := strings.ReplaceAll(out.String(), "\r\n", "\n")
	for _, want := range []string{"on-a-tty\n", "30 100\n", "hello\n", "got hello\n", "40 120\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("output %q lacks %q", got, want)
		}
	}
	if st.Code != 5 {
		t.Errorf("exit %d, want 5", st.Code)
	}

	_, err = a.ExecPTY(ctx, "sbx_pty", api.ExecRequest{Command: "true"}, adapters.TermSize{}, nil, nil, func(string, []byte) error { return nil })
	if !api.IsCode(err, api.CodeInvalidRequest) {
		t.Errorf("a terminal of no size: %v, want invalid_request", err)
	}
}
