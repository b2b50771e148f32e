package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// This file holds the reliability harness's fake backends, which it kills and
// restarts, and what it checks of the faults they inject into execs.

// backendProc is one `differently-server adapter serve` child process in front of
// a fake adapter. Restarting it serves the same address, so the pool's endpoint
// stays valid, but an in-memory fake starts empty: every instance it held is lost.
type backendProc struct {
	t    *testing.T
	env  []string
	args []string
	url  string // http://host:port, fixed by the first start

	mu     sync.Mutex
	cmd    *exec.Cmd
	stderr *logBuffer
	killed bool
}

// startBackend serves a fake backend on a loopback port chosen by the system. It is
// stopped with SIGTERM, and must exit cleanly, when the test ends.
func startBackend(t *testing.T, env []string, args ...string) *backendProc {
	t.Helper()
	b := &backendProc{t: t, env: env, args: args}
	b.url = b.run("127.0.0.1:0")
	t.Cleanup(b.stop)
	return b
}

// run starts the process on listen and returns the URL it printed.
func (b *backendProc) run(listen string) string {
	b.t.Helper()
	cmd := exec.Command(binary, append([]string{"adapter", "serve", "--listen", listen}, b.args...)...)
	cmd.Env = append(os.Environ(), b.env...)
	stderr := newLogBuffer()
	cmd.Stderr = stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.t.Fatal(err)
	}
	type read struct {
		line string
		err  error
	}
	first := make(chan read, 1)
	go func() {
		line, err := bufio.NewReader(out).ReadString('\n')
		first <- read{line, err}
	}()
	var r read
	select {
	case r = <-first:
	case <-time.After(startTimeout):
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		b.t.Fatalf("adapter serve printed no address within %s; stderr: %s", startTimeout, stderr)
	}
	m := servingLine.FindStringSubmatch(r.line)
	if m == nil {
		_ = cmd.Wait()
		b.t.Fatalf("adapter serve printed %q (%v) instead of its address; stderr: %s", r.line, r.err, stderr)
	}
	b.mu.Lock()
	b.cmd, b.stderr, b.killed = cmd, stderr, false
	b.mu.Unlock()
	return m[1]
}

// kill crashes the backend by its PID: SIGKILL, so it answers nothing more and
// forgets every instance.
func (b *backendProc) kill() {
	b.t.Helper()
	b.mu.Lock()
	cmd := b.cmd
	b.killed = true
	b.mu.Unlock()
	if err := cmd.Process.Kill(); err != nil {
		b.t.Fatalf("kill backend %s: %v", b.url, err)
	}
	_ = cmd.Wait()
}

// restart serves the backend again on its address, empty.
func (b *backendProc) restart() {
	b.t.Helper()
	addr := b.url[len("http://"):]
	if got := b.run(addr); got != b.url {
		b.t.Fatalf("restarted backend serves %s, want %s", got, b.url)
	}
}

// droppedLine is what `adapter serve` logs for each streamed exec whose connection
// it drops.
const droppedLine = "adapter serve: dropped the connection of a streamed exec"

// drops counts the streamed execs whose connection the running process dropped, and
// returns a channel closed at its next write to stderr.
func (b *backendProc) drops() (int, <-chan struct{}) {
	b.mu.Lock()
	stderr := b.stderr
	b.mu.Unlock()
	text, next := stderr.read()
	return strings.Count(text, droppedLine), next
}

func (b *backendProc) stop() {
	b.mu.Lock()
	cmd, stderr, killed := b.cmd, b.stderr, b.killed
	b.mu.Unlock()
	if killed {
		return // waited for by kill
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		b.t.Errorf("adapter serve did not exit cleanly on SIGTERM: %v; stderr: %s", err, stderr)
	}
}

// execFaultCodes are the codes the harness's backends inject into execs, and
// execFaultAnswers what the API must answer for each: the adapter specification's
// error table (insufficient_capacity is shown as provider_unavailable).
var (
	execFaultCodes   = []string{"provider_unavailable", "insufficient_capacity", "invalid_state", "not_found"}
	execFaultAnswers = map[string]struct {
		status int
		code   string
	}{
		"provider_unavailable":  {http.StatusServiceUnavailable, "provider_unavailable"},
		"insufficient_capacity": {http.StatusServiceUnavailable, "provider_unavailable"},
		"invalid_state":         {http.StatusConflict, "invalid_state"},
		"not_found":             {http.StatusNotFound, "not_found"},
	}
	injectedExecFault = regexp.MustCompile(`fake: injected exec failure \(execErrorRate: (\w+)\)`)
	// injectedStreamFault is a streamed exec's fault after output, which reaches the
	// API's client only as the words of the final event's error.
	injectedStreamFault = regexp.MustCompile(`fake: injected exec failure after output \(execErrorRate: (\w+)\)`)
	// droppedStream is what the final event of the API's stream says when the backend
	// dropped the connection of its own (execStreamDropRate): the adapter client's
	// words for a body that broke off. The fake's words never cross the wire.
	droppedStream = regexp.MustCompile(`^reading the adapter stream failed: unexpected EOF$`)
)

// execFault says which injected fault an exec's answer reports, and whether the
// answer is the one the contract maps that fault to. ok is false for an answer that
// no injected fault explains.
func execFault(c apiCall) (fault string, ok bool) {
	m := injectedExecFault.FindStringSubmatch(c.message)
	if m == nil {
		return "", false
	}
	want, known := execFaultAnswers[m[1]]
	return m[1], known && c.status == want.status && c.code == want.code
}

// allowedExec5xx says whether a 5xx answer of an exec is one the contract allows: an
// injected outage or capacity fault, shown as 503 provider_unavailable.
func allowedExec5xx(c apiCall) bool {
	fault, ok := execFault(c)
	return ok && c.status == http.StatusServiceUnavailable && fault != ""
}

// awaitLost waits, one reconcile pass at a time, until no running sandbox on pool
// names an instance its backend does not hold: after a backend restart, the
// reconciler must fail the sandboxes whose instances were lost with it, once they
// are older than its grace for recent changes (30 s).
func awaitLost(t *testing.T, ctx context.Context, f *fleet, pool, url, token, installation string, deadline time.Time) int {
	t.Helper()
	checkedAt, status := -1, "no pass yet"
	f.waitFor(fmt.Sprintf("the reconciler to fail the sandboxes whose instances the restart of pool %s's backend lost", pool), deadline,
		func() (bool, string) {
			n, err := f.passes()
			if err != nil {
				return false, fmt.Sprintf("%s; %v", status, err)
			}
			if n == checkedAt {
				return false, status
			}
			checkedAt = n
			held := map[string]bool{}
			for _, in := range listAll(t, ctx, url, token, installation) {
				held[in.Ref] = true
			}
			missing := 0
			for _, sb := range f.listQuery(f.live()[0], "state=running&pool="+pool) {
				if !held[sb.BackendRef] {
					missing++
				}
			}
			status = fmt.Sprintf("%d running sandboxes on pool %s name an instance it does not hold", missing, pool)
			return missing == 0, status
		})
	lost := 0
	for _, sb := range f.listQuery(f.live()[0], "state=failed&pool="+pool) {
		if sb.Reason == lostReason {
			lost++
		}
	}
	return lost
}

// lostReason is the reconciler's reason for failing a sandbox whose instance the
// backend no longer holds.
const lostReason = "backend instance disappeared"

// logBuffer is a child process's stderr, which the test may read while the process
// writes it: each write closes the channel read handed out, so a reader waits on
// the process's lines rather than polling.
type logBuffer struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	written chan struct{}
}

func newLogBuffer() *logBuffer { return &logBuffer{written: make(chan struct{})} }

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	close(l.written)
	l.written = make(chan struct{})
	return l.buf.Write(p)
}

// read returns what was written so far and a channel closed at the next write.
func (l *logBuffer) read() (string, <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String(), l.written
}

func (l *logBuffer) String() string {
	text, _ := l.read()
	return text
}

// awaitDropsLogged checks that the backends dropped exactly as many streams as the
// API's clients saw dropped: each drop they log must have reached a client as one.
// A line may still be on its way from a backend's stderr, so it waits for the count
// to come up, until deadline.
func awaitDropsLogged(t *testing.T, backends map[string]*backendProc, seen int, deadline time.Time) {
	t.Helper()
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	for {
		logged := 0
		wake := []reflect.SelectCase{{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(timer.C)}}
		for _, b := range backends {
			n, next := b.drops()
			logged += n
			wake = append(wake, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(next)})
		}
		switch {
		case logged > seen:
			t.Errorf("the backends dropped %d streamed execs' connections, and the API's clients saw %d of them dropped", logged, seen)
			return
		case logged == seen:
			return
		}
		// Wake at the next line of any backend, or give up at the deadline.
		if i, _, _ := reflect.Select(wake); i == 0 {
			t.Errorf("the API's clients saw %d streamed execs dropped, the backends logged %d drops", seen, logged)
			return
		}
	}
}
