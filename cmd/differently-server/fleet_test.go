package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/different-ai/differently/server/store"
	"github.com/different-ai/differently/server/store/postgres"
)

// This file holds what the multi-replica tests share: a fleet of daemon child
// processes on one database, whose logs and events wake the waiting test, and an API
// client that records every answer. What the test learns of their reconcilers it
// reads from their metrics and events (fleet_metrics_test.go).

type apiSandbox struct {
	ID         string `json:"id"`
	State      string `json:"state"`
	Pool       string `json:"pool"`
	Reason     string `json:"reason"`
	BackendRef string `json:"backendRef"`
	Attempts   int    `json:"attempts"`
}

// fleet is the daemons of one test: it follows their event history and reads their
// logs, and wakes the waiting test on every event and on every line a live daemon
// writes.
type fleet struct {
	t       *testing.T
	cfgPath string
	dbURL   string
	env     []string
	token   string
	wake    chan struct{}

	mu    sync.Mutex
	procs []*daemonProc
	// claimed is closed, and replaced, whenever a provisioning pass that claimed
	// sandboxes ends: the queue had room made in it. See claimedSignal.
	claimed chan struct{}
	// calls records every API call made through do, in order.
	calls []apiCall
	// races are the data race reports of any daemon, killed ones included.
	races []string
	// logged counts the WARN and ERROR lines of every live daemon by level and msg.
	logged map[string]int
	// following is set once the event follower runs (followEvents); started tells
	// it that a daemon began to serve.
	following bool
	started   chan struct{}
}

// daemonProc is one daemon child process; the fields below cmd are guarded by fleet.mu.
type daemonProc struct {
	name string
	cmd  *exec.Cmd

	// url is set once the daemon serves; live lists it from then on.
	url     string
	killed  bool
	replica string
	creates int // Creates begun: placed events by this replica's scheduler
	// lateCreates counts the Creates that make a new instance, so take
	// createLatencyMs: see onEvent.
	lateCreates int
	// reconciler is what the daemon's /metrics last said of its reconciler: read
	// when a test asks, and just before the daemon is killed.
	reconciler reconcileFigures
	tail       []string
}

// apiCall is one API request and what came of it.
type apiCall struct {
	via          *daemonProc
	method, path string
	// status is 0 when no answer came (err says why).
	status     int
	code       string
	message    string
	retryAfter string
	err        error
}

func (c apiCall) String() string {
	if c.status == 0 {
		return fmt.Sprintf("%s %s via %s: %v", c.method, c.path, c.via.name, c.err)
	}
	s := fmt.Sprintf("%s %s via %s: %d", c.method, c.path, c.via.name, c.status)
	if c.code != "" {
		s += fmt.Sprintf(" %s: %s", c.code, c.message)
	}
	if c.retryAfter != "" {
		s += " (Retry-After " + c.retryAfter + ")"
	}
	return s
}

var (
	replicaAttr    = regexp.MustCompile(`replica=(\S+)`)
	warnOrError    = regexp.MustCompile(`level=(WARN|ERROR) msg=("[^"]*"|\S+)`)
	raceReportLine = "WARNING: DATA RACE"
)

// newFleet writes cfg as the daemons' config file and makes an admin token with it.
// env is added to every daemon's environment.
func newFleet(t *testing.T, dbURL, cfg string, env []string) *fleet {
	t.Helper()
	cfgPath := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	// An empty DIFFERENTLY_DATABASE_URL keeps a developer's own from overriding the file.
	env = append([]string{"DIFFERENTLY_DATABASE_URL="}, env...)
	out, code := runTool(t, env, "token", "create", "--admin", "--config", cfgPath)
	if code != 0 {
		t.Fatalf("token create: exit %d: %s", code, out)
	}
	return &fleet{t: t, cfgPath: cfgPath, dbURL: dbURL, env: env, token: strings.TrimSpace(out),
		wake: make(chan struct{}, 1), claimed: make(chan struct{}), started: make(chan struct{}, 1)}
}

// startTimeout bounds how long a daemon may take to print its address.
const startTimeout = 60 * time.Second

// start runs one daemon and returns once it printed its URL. It is stopped with
// SIGTERM (and must exit cleanly) when the test ends, unless the test killed it.
// Call it from the test's goroutine.
func (f *fleet) start(name string) *daemonProc {
	t := f.t
	t.Helper()
	p := &daemonProc{name: name}
	cmd := exec.Command(binary, "--config", f.cfgPath, "--listen", "127.0.0.1:0", "--log-level", "debug")
	cmd.Env = append(os.Environ(), f.env...)
	cmd.Stderr = &lineWriter{line: func(l string) { f.logLine(p, l) }}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p.cmd = cmd
	f.mu.Lock()
	f.procs = append(f.procs, p)
	f.mu.Unlock()
	t.Cleanup(func() { f.stop(p) })
	type read struct {
		line string
		err  error
	}
	first := make(chan read, 1)
	go func() {
		line, err := bufio.NewReader(stdout).ReadString('\n')
		first <- read{line, err}
	}()
	var r read
	select {
	case r = <-first:
	case <-time.After(startTimeout):
		t.Fatalf("daemon %s printed no address within %s:\n%s", name, startTimeout, f.tail(p))
	}
	m := servingLine.FindStringSubmatch(r.line)
	if m == nil {
		t.Fatalf("daemon %s printed %q (%v) instead of its address:\n%s", name, r.line, r.err, f.tail(p))
	}
	f.mu.Lock()
	p.url = m[1]
	follow := !f.following
	f.following = true
	f.mu.Unlock()
	select {
	case f.started <- struct{}{}:
	default:
	}
	if follow {
		f.followEvents()
	}
	return p
}

// event is what the fleet reads of an event (docs/events.md).
type event struct {
	Cursor    string `json:"cursor"`
	SandboxID string `json:"sandboxId"`
	Type      string `json:"type"`
	Actor     string `json:"actor"`
	Pool      string `json:"pool"`
	Attempt   int    `json:"attempt"`
	Code      string `json:"code"`
	Message   string `json:"message"`
}

func (e event) String() string {
	s := fmt.Sprintf("sandbox %s: %s by %s", e.SandboxID, e.Type, e.Actor)
	if e.Pool != "" {
		s += " on pool " + e.Pool
	}
	if e.Code != "" {
		s += " (" + e.Code + ")"
	}
	if e.Message != "" {
		s += ": " + e.Message
	}
	return s
}

// followEvents follows GET /v1/events?follow=true, through a live daemon, until the
// test ends: when the daemon it reads stops or dies, it goes on through another
// from the last cursor it read, so no event is missed. The events tell the test
// when Creates begin (placed) and when the queue gives up a sandbox.
func (f *fleet) followEvents() {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		cursor := ""
		for ctx.Err() == nil {
			var read bool
			if live := f.live(); len(live) > 0 {
				cursor, read = f.readEvents(ctx, live[0], cursor)
			}
			if read {
				continue
			}
			// Nothing to read from: wait for a daemon to start, or a moment for one
			// that is starting or stopping to settle.
			pause := time.NewTimer(100 * time.Millisecond)
			select {
			case <-ctx.Done():
			case <-f.started:
			case <-pause.C:
			}
			pause.Stop()
		}
	}()
	f.t.Cleanup(func() {
		cancel()
		<-done
	})
}

// readEvents reads one follow stream from via, from cursor on, and returns the last
// cursor it read and whether it read any event.
func (f *fleet) readEvents(ctx context.Context, via *daemonProc, cursor string) (string, bool) {
	req, err := http.NewRequestWithContext(ctx, "GET", via.url+"/v1/events?follow=true&cursor="+url.QueryEscape(cursor), nil)
	if err != nil {
		return cursor, false
	}
	req.Header.Set("Authorization", "Bearer "+f.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return cursor, false
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return cursor, false
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 8<<20)
	sc.Split(wholeLines)
	read := false
	for sc.Scan() {
		var e event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			f.t.Errorf("follow events via %s: bad line %q: %v", via.name, sc.Text(), err)
			return cursor, read
		}
		cursor, read = e.Cursor, true
		f.onEvent(e)
	}
	return cursor, read
}

// wholeLines splits a stream into lines like bufio.ScanLines, but drops a last line
// without its newline: a daemon killed while writing one leaves it cut short, and
// the follower resumes from the last whole line's cursor on another daemon.
func wholeLines(data []byte, atEOF bool) (int, []byte, error) {
	if i := bytes.IndexByte(data, '\n'); i >= 0 {
		return i + 1, data[:i], nil
	}
	if atEOF {
		return len(data), nil, nil
	}
	return 0, nil, nil
}

// onEvent counts the Creates each replica begins and wakes whoever waits.
func (f *fleet) onEvent(e event) {
	f.mu.Lock()
	if e.Type == "placed" {
		total := 0
		var by *daemonProc
		for _, q := range f.procs {
			total += q.creates
			if q.replica != "" && e.Actor == "scheduler:"+q.replica {
				by = q
			}
		}
		if by != nil {
			by.creates++
			// For TestReplicasProvisionExactlyOnce: a first attempt (a retry after a
			// lost response finds its instance at once), after the two injected errors.
			if total >= 4 && e.Attempt == 1 {
				by.lateCreates++
			}
		}
	}
	if e.Type == "placed" || e.Type == "failed" {
		// A sandbox left the queue: room for a create refused with a full queue.
		close(f.claimed)
		f.claimed = make(chan struct{})
	}
	f.mu.Unlock()
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// stop ends a daemon by its PID: SIGTERM and a clean exit, or, for one the test
// killed, just the wait.
func (f *fleet) stop(p *daemonProc) {
	f.mu.Lock()
	killed := p.killed
	f.mu.Unlock()
	if killed {
		_ = p.cmd.Wait()
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- p.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			f.t.Errorf("daemon %s did not exit cleanly on SIGTERM: %v\n%s", p.name, err, f.tail(p))
		}
	case <-time.After(45 * time.Second):
		_ = p.cmd.Process.Kill()
		<-done
		f.t.Errorf("daemon %s did not stop within 45 s of SIGTERM\n%s", p.name, f.tail(p))
	}
}

// kill crashes a daemon: SIGKILL, so nothing is handed back or released. Its
// metrics are read first: its counters die with it, and what its reconciler did
// must still count.
func (f *fleet) kill(p *daemonProc) {
	if err := f.readMetrics(p); err != nil {
		f.t.Errorf("before killing %s: %v", p.name, err)
	}
	f.mu.Lock()
	p.killed = true
	f.mu.Unlock()
	if err := p.cmd.Process.Kill(); err != nil {
		f.t.Fatalf("kill %s: %v", p.name, err)
	}
}

// live returns the daemons serving and not killed, in the order they started.
func (f *fleet) live() []*daemonProc {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*daemonProc
	for _, p := range f.procs {
		if p.url != "" && !p.killed {
			out = append(out, p)
		}
	}
	return out
}

func (f *fleet) isKilled(p *daemonProc) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return p.killed
}

func (f *fleet) logLine(p *daemonProc, l string) {
	f.mu.Lock()
	if strings.Contains(l, raceReportLine) {
		f.races = append(f.races, p.name)
	}
	if p.killed {
		// Lines still in the pipe of a killed replica say nothing about the others.
		f.mu.Unlock()
		return
	}
	if len(p.tail) == 300 {
		p.tail = slices.Delete(p.tail, 0, 100)
	}
	p.tail = append(p.tail, l)
	if p.replica == "" {
		if m := replicaAttr.FindStringSubmatch(l); m != nil {
			p.replica = m[1]
		}
	}
	if m := warnOrError.FindStringSubmatch(l); m != nil {
		if f.logged == nil {
			f.logged = map[string]int{}
		}
		f.logged[m[1]+" "+m[2]]++
	}
	f.mu.Unlock()
	select {
	case f.wake <- struct{}{}:
	default: // a wake-up is already pending
	}
}

// reconcileNow asks via for a reconcile pass. Passes never overlap: a 409 says
// another replica's pass was running, so it asks again once a daemon counted the end
// of a pass. Only the test's goroutine may call it.
func (f *fleet) reconcileNow(ctx context.Context, via *daemonProc, until time.Time) (apiCall, []byte) {
	f.t.Helper()
	for {
		// An unreadable count is its last reading: the wait below then says why.
		before, _ := f.passes()
		c, data := f.do(ctx, via, "POST", "/v1/admin/reconcile", "", nil)
		if c.status != http.StatusConflict {
			return c, data
		}
		f.waitFor("the running reconcile pass to end", until, func() (bool, string) {
			n, err := f.passes()
			return n > before, fmt.Sprintf("%s; %d passes counted (%v)", c, n, err)
		})
	}
}

// createLines counts the Creates every daemon began so far (placed events).
func (f *fleet) createLines() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, p := range f.procs {
		n += p.creates
	}
	return n
}

// claims lists the non-terminal sandboxes under a claim, by claiming replica ID.
func (f *fleet) claims() map[string][]store.Sandbox {
	f.t.Helper()
	ctx := f.t.Context()
	st, err := postgres.Open(ctx, f.dbURL)
	if err != nil {
		f.t.Fatal(err)
	}
	defer st.Close()
	out := map[string][]store.Sandbox{}
	filter := store.SandboxFilter{States: store.NonTerminalStates, Limit: store.MaxLimit}
	for {
		page, next, err := st.ListSandboxes(ctx, filter)
		if err != nil {
			f.t.Fatal(err)
		}
		for _, sb := range page {
			if sb.ClaimedBy != "" {
				out[sb.ClaimedBy] = append(out[sb.ClaimedBy], sb)
			}
		}
		if next == "" {
			return out
		}
		filter.Cursor = next
	}
}

// heldBy lists the sandboxes whose claim names p's replica, as "ID (state)". A
// daemon that has not logged its replica ID yet is reported holding nothing.
func (f *fleet) heldBy(p *daemonProc) []string {
	f.t.Helper()
	f.mu.Lock()
	replica := p.replica
	f.mu.Unlock()
	if replica == "" {
		return nil
	}
	var held []string
	for _, sb := range f.claims()[replica] {
		held = append(held, fmt.Sprintf("%s (%s)", sb.ID, sb.State))
	}
	return held
}

// claimedSignal returns a channel closed when the next sandbox leaves the queue
// (placed on a pool, or failed). Any goroutine may wait on it.
func (f *fleet) claimedSignal() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.claimed
}

// waitFor checks cond after every log line of a live daemon and every event until
// it holds; the deadline only turns a hang into a failure that says what was
// awaited. Only the test's goroutine may wait.
func (f *fleet) waitFor(what string, until time.Time, cond func() (bool, string)) {
	f.t.Helper()
	limit := time.Until(until)
	deadline := time.NewTimer(limit)
	defer deadline.Stop()
	for {
		ok, status := cond()
		if ok {
			return
		}
		select {
		case <-f.wake:
		case <-deadline.C:
			f.t.Fatalf("waited %s for %s: %s\n%s", limit.Round(time.Millisecond), what, status, f.tails())
		}
	}
}

// do makes one API call and records it; it never fails the test, so any goroutine
// may use it. err is set when no answer came.
func (f *fleet) do(ctx context.Context, via *daemonProc, method, path, body string, header map[string]string) (apiCall, []byte) {
	c := apiCall{via: via, method: method, path: path}
	data, err := f.send(ctx, &c, body, header)
	c.err = err
	f.record(c)
	return c, data
}

// record adds c to the calls checkAnswers judges.
func (f *fleet) record(c apiCall) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, c)
}

func (f *fleet) send(ctx context.Context, c *apiCall, body string, header map[string]string) ([]byte, error) {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, c.method, c.via.url+c.path, rd)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+f.token)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	c.status = resp.StatusCode
	c.retryAfter = resp.Header.Get("Retry-After")
	if resp.StatusCode >= 400 {
		var env struct {
			Error struct {
				Code    string `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		_ = json.Unmarshal(data, &env)
		c.code, c.message = env.Error.Code, env.Error.Message
	}
	return data, nil
}

// call makes one API call from the test's goroutine, failing the test unless it is
// answered with want; out, if set, receives the decoded body.
func (f *fleet) call(via *daemonProc, method, path, body string, want int, out any) {
	f.t.Helper()
	c, data := f.do(f.t.Context(), via, method, path, body, nil)
	if c.err != nil {
		f.t.Fatalf("%s", c)
	}
	if c.status != want {
		f.t.Fatalf("%s, want %d: %s", c, want, data)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			f.t.Fatalf("%s %s: decoding %q: %v", method, path, data, err)
		}
	}
}

// list reads every sandbox through via's API.
func (f *fleet) list(via *daemonProc) map[string]apiSandbox {
	return f.listQuery(via, "")
}

// listQuery reads the sandboxes matching query (URL parameters, without limit).
func (f *fleet) listQuery(via *daemonProc, query string) map[string]apiSandbox {
	f.t.Helper()
	var page struct {
		Items []apiSandbox `json:"items"`
	}
	path := "/v1/sandboxes?limit=1000"
	if query != "" {
		path += "&" + query
	}
	f.call(via, "GET", path, "", http.StatusOK, &page)
	out := map[string]apiSandbox{}
	for _, sb := range page.Items {
		out[sb.ID] = sb
	}
	return out
}

func summary(byState map[string][]string) string {
	var parts []string
	for state, ids := range byState {
		parts = append(parts, fmt.Sprintf("%s=%d", state, len(ids)))
	}
	slices.Sort(parts)
	return strings.Join(parts, " ")
}

func (f *fleet) tail(p *daemonProc) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	lines := p.tail
	if len(lines) > 40 {
		lines = lines[len(lines)-40:]
	}
	return strings.Join(lines, "\n")
}

func (f *fleet) tails() string {
	f.mu.Lock()
	procs := slices.Clone(f.procs)
	f.mu.Unlock()
	var b strings.Builder
	for _, p := range procs {
		fmt.Fprintf(&b, "--- last lines of %s:\n%s\n", p.name, f.tail(p))
	}
	return b.String()
}

// lineWriter hands each complete line written to it to line.
type lineWriter struct {
	buf  bytes.Buffer
	line func(string)
}

func (w *lineWriter) Write(b []byte) (int, error) {
	w.buf.Write(b)
	for {
		i := bytes.IndexByte(w.buf.Bytes(), '\n')
		if i < 0 {
			return len(b), nil
		}
		l := string(w.buf.Next(i + 1))
		w.line(strings.TrimSuffix(l, "\n"))
	}
}
