package envd_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/adapters/devhost"
	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/internal/clock"
	"github.com/different-ai/differently/server/e2b/envd"
	"github.com/different-ai/differently/server/e2b/envd/gen/filesystempb"
	"github.com/different-ai/differently/server/e2b/envd/gen/filesystempb/filesystempbconnect"
	"github.com/different-ai/differently/server/e2b/envd/gen/processpb"
	"github.com/different-ai/differently/server/e2b/envd/gen/processpb/processpbconnect"
	"github.com/different-ai/differently/server/lifecycle"
	"github.com/different-ai/differently/server/pools"
	"github.com/different-ai/differently/server/pools/poolstest"
	"github.com/different-ai/differently/server/sandboxes"
	"github.com/different-ai/differently/server/store"
	"github.com/different-ai/differently/server/store/sqlite"
)

type nopWaker struct{}

func (nopWaker) Wake(store.State) {}

// grant is what a token lets its holder do: one sandbox, as one caller.
type grant struct {
	sandbox string
	caller  sandboxes.Caller
}

// verifier is the control plane's envd token check, as a table.
type verifier map[string]grant

func (v verifier) Verify(_ context.Context, sandboxID, token string) (sandboxes.Caller, error) {
	g, ok := v[token]
	if !ok || g.sandbox != sandboxID {
		for _, g := range v {
			if g.sandbox == sandboxID {
				return sandboxes.Caller{}, api.Errorf(api.CodeUnauthenticated, "bad access token")
			}
		}
		return sandboxes.Caller{}, api.Errorf(api.CodeNotFound, "sandbox %s not found", sandboxID)
	}
	return g.caller, nil
}

var alice = sandboxes.Caller{TokenID: "tok_alice", Org: "acme", Project: "alice"}

type env struct {
	t       *testing.T
	svc     *sandboxes.Service
	handler *envd.Handler
	srv     *httptest.Server
	sandbox string
	token   string
}

// newEnv serves envd's protocol for one running sandbox of alice's on a devhost pool,
// whose commands are real processes of this machine.
func newEnv(t *testing.T) *env {
	t.Helper()
	return newEnvWith(t, envd.Options{})
}

// otherSandbox is a sandbox ID a second token ("other-token") of alice's names, to
// show that one sandbox's token reaches nothing of another's.
const otherSandbox = "sbx_other"

// newEnvWith is newEnv with the handler's options.
func newEnvWith(t *testing.T, opts envd.Options) *env {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "db.sqlite"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	clk := clock.NewManual(time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC))
	pool := store.Pool{Name: "devhost", Adapter: "devhost", Trust: api.TrustPrivate}
	if _, err := st.CreatePool(ctx, clk.Now(), pool); err != nil {
		t.Fatal(err)
	}
	a, err := devhost.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	caps, err := a.Capabilities(ctx)
	if err != nil {
		t.Fatal(err)
	}
	caps.Features = adapters.EffectiveFeatures(a, caps.Features)
	capacity, _ := a.Capacity(ctx)
	view := pools.View{Pool: pool, Adapter: a, Info: a.Info(), Capabilities: caps, Capacity: capacity,
		Trust: api.TrustPrivate, Healthy: true, LastProbeAt: clk.Now()}
	svc, err := sandboxes.New(sandboxes.Options{Store: st, Pools: poolstest.New(view), Waker: nopWaker{}, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	sb, _, _, err := svc.Create(ctx, alice, sandboxes.CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	inst, err := a.Create(ctx, adapters.CreateRequest{ID: sb.ID, Installation: "test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Delete(context.Background(), inst.Ref) })
	by := lifecycle.Scheduler("test")
	if _, err := st.UpdateSandbox(ctx, sb.ID, clk.Now(), func(cur *store.Sandbox) error {
		p := lifecycle.Placement{Pool: "devhost", Claimer: "test", ClaimUntil: clk.Now().Add(time.Minute)}
		if err := lifecycle.Place(cur, p, clk.Now(), by); err != nil {
			return err
		}
		return lifecycle.Run(cur, lifecycle.Instance{Ref: inst.Ref}, clk.Now(), 0, by)
	}); err != nil {
		t.Fatal(err)
	}
	h := envd.NewHandler(svc, verifier{"envd-token": {sb.ID, alice}, "other-token": {otherSandbox, alice}}, opts)
	srv := httptest.NewServer(h)
	t.Cleanup(func() {
		// Processes first: a stream relaying one keeps its request open.
		h.Close()
		srv.Close()
	})
	return &env{t: t, svc: svc, handler: h, srv: srv, sandbox: sb.ID, token: "envd-token"}
}

// headers is how the SDK names the sandbox and proves its right to it.
type headers struct {
	sandbox, token string
}

func (h headers) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("E2b-Sandbox-Id", h.sandbox)
	if h.token != "" {
		r.Header.Set("X-Access-Token", h.token)
	}
	return http.DefaultTransport.RoundTrip(r)
}

func (e *env) client(sandbox, token string) *http.Client {
	return &http.Client{Transport: headers{sandbox, token}}
}

func (e *env) process() processpbconnect.ProcessClient {
	return processpbconnect.NewProcessClient(e.client(e.sandbox, e.token), e.srv.URL, connect.WithProtoJSON())
}

func (e *env) files() filesystempbconnect.FilesystemClient {
	return filesystempbconnect.NewFilesystemClient(e.client(e.sandbox, e.token), e.srv.URL, connect.WithProtoJSON())
}

// run starts a command and reads its stream to the end.
func (e *env) run(cfg *processpb.ProcessConfig) (stdout, stderr string, end *processpb.ProcessEvent_EndEvent) {
	e.t.Helper()
	stream, err := e.process().Start(context.Background(), connect.NewRequest(&processpb.StartRequest{Process: cfg}))
	if err != nil {
		e.t.Fatal(err)
	}
	defer stream.Close()
	var out, errOut bytes.Buffer
	first := true
	for stream.Receive() {
		ev := stream.Msg().GetEvent()
		if first && ev.GetStart() == nil {
			e.t.Fatalf("first event %v, want start", ev)
		}
		first = false
		out.Write(ev.GetData().GetStdout())
		errOut.Write(ev.GetData().GetStderr())
		if ev.GetEnd() != nil {
			end = ev.GetEnd()
		}
	}
	if err := stream.Err(); err != nil {
		e.t.Fatal(err)
	}
	if end == nil {
		e.t.Fatal("the stream ended without an end event")
	}
	return out.String(), errOut.String(), end
}

func TestStartStreamsOutputAndExitCode(t *testing.T) {
	e := newEnv(t)
	out, errOut, end := e.run(&processpb.ProcessConfig{Cmd: "/bin/sh", Args: []string{"-c", "echo out; echo err >&2; exit 7"}})
	if out != "out\n" || errOut != "err\n" {
		t.Fatalf("stdout %q, stderr %q; want out, err", out, errOut)
	}
	if end.ExitCode != 7 || !end.Exited || end.Status != "exit status 7" {
		t.Fatalf("end %v, want exit status 7", end)
	}
	_, _, end = e.run(&processpb.ProcessConfig{Cmd: "true"})
	if end.ExitCode != 0 || !end.Exited || end.Status != "exit status 0" {
		t.Fatalf("end %v, want exit status 0", end)
	}
}

func TestStartEnvAndCwd(t *testing.T) {
	e := newEnv(t)
	if _, err := e.files().MakeDir(context.Background(), connect.NewRequest(&filesystempb.MakeDirRequest{Path: "work"})); err != nil {
		t.Fatal(err)
	}
	cwd := "work"
	out, _, end := e.run(&processpb.ProcessConfig{Cmd: "/bin/sh", Args: []string{"-c", `echo "$GREETING"; pwd`},
		Envs: map[string]string{"GREETING": "hello"}, Cwd: &cwd})
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if end.ExitCode != 0 || len(lines) != 2 || lines[0] != "hello" || !strings.HasSuffix(lines[1], "/work") {
		t.Fatalf("output %q, end %v; want hello and a directory ending in /work", out, end)
	}
}

// startSleep starts a command that runs until killed and returns its stream once the
// start event came.
func (e *env) startSleep(ctx context.Context, tag string) (*connect.ServerStreamForClient[processpb.StartResponse], uint32) {
	e.t.Helper()
	stream, err := e.process().Start(ctx, connect.NewRequest(&processpb.StartRequest{
		Process: &processpb.ProcessConfig{Cmd: "sleep", Args: []string{"1000"}}, Tag: &tag}))
	if err != nil {
		e.t.Fatal(err)
	}
	if !stream.Receive() || stream.Msg().GetEvent().GetStart() == nil {
		e.t.Fatalf("no start event: %v", stream.Err())
	}
	return stream, stream.Msg().GetEvent().GetStart().GetPid()
}

// killedEnd reads a stream to its end event, which must say the process was killed.
func killedEnd[T interface {
	GetEvent() *processpb.ProcessEvent
}](t *testing.T, receive func() bool, msg func() T, streamErr func() error) {
	t.Helper()
	for receive() {
		if end := msg().GetEvent().GetEnd(); end != nil {
			if end.ExitCode != -1 || end.Exited || end.Status != "signal: killed" {
				t.Fatalf("end %v, want -1, signal: killed", end)
			}
			return
		}
	}
	t.Fatalf("no end event: %v", streamErr())
}

func TestSendSignalKillsAndListShows(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	stream, pid := e.startSleep(ctx, "sleeper")
	defer stream.Close()
	list, err := e.process().List(ctx, connect.NewRequest(&processpb.ListRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	if ps := list.Msg.Processes; len(ps) != 1 || ps[0].Pid != pid || ps[0].GetTag() != "sleeper" || ps[0].Config.Cmd != "sleep" {
		t.Fatalf("list %v, want the sleep as pid %d", ps, pid)
	}
	if _, err := e.process().SendSignal(ctx, connect.NewRequest(&processpb.SendSignalRequest{
		Process: &processpb.ProcessSelector{Selector: &processpb.ProcessSelector_Pid{Pid: pid}}, Signal: processpb.Signal_SIGNAL_SIGKILL})); err != nil {
		t.Fatal(err)
	}
	killedEnd(t, stream.Receive, stream.Msg, stream.Err)
	list, err = e.process().List(ctx, connect.NewRequest(&processpb.ListRequest{}))
	if err != nil || len(list.Msg.Processes) != 0 {
		t.Fatalf("list after the kill: %v, %v; want none", list, err)
	}
	_, err = e.process().SendSignal(ctx, connect.NewRequest(&processpb.SendSignalRequest{
		Process: &processpb.ProcessSelector{Selector: &processpb.ProcessSelector_Pid{Pid: pid}}, Signal: processpb.Signal_SIGNAL_SIGKILL}))
	if connect.CodeOf(err) != connect.CodeNotFound {
		t.Fatalf("signal to an ended process: %v, want not_found", err)
	}
}

// A background command is a Start stream the client leaves: the process goes on, and
// Connect attaches to it again.
func TestProcessOutlivesItsStream(t *testing.T) {
	e := newEnv(t)
	ctx, hangUp := context.WithCancel(context.Background())
	stream, pid := e.startSleep(ctx, "bg")
	hangUp()
	stream.Close()
	list, err := e.process().List(context.Background(), connect.NewRequest(&processpb.ListRequest{}))
	if err != nil || len(list.Msg.Processes) != 1 || list.Msg.Processes[0].Pid != pid {
		t.Fatalf("list after the hang-up: %v, %v; want pid %d", list, err, pid)
	}
	again, err := e.process().Connect(context.Background(), connect.NewRequest(&processpb.ConnectRequest{
		Process: &processpb.ProcessSelector{Selector: &processpb.ProcessSelector_Tag{Tag: "bg"}}}))
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	if !again.Receive() || again.Msg().GetEvent().GetStart().GetPid() != pid {
		t.Fatalf("connect: first event %v (%v), want start of %d", again.Msg(), again.Err(), pid)
	}
	if _, err := e.process().SendSignal(context.Background(), connect.NewRequest(&processpb.SendSignalRequest{
		Process: &processpb.ProcessSelector{Selector: &processpb.ProcessSelector_Pid{Pid: pid}}, Signal: processpb.Signal_SIGNAL_SIGTERM})); err != nil {
		t.Fatal(err)
	}
	killedEnd(t, again.Receive, again.Msg, again.Err)
}

func TestCloseKillsProcesses(t *testing.T) {
	e := newEnv(t)
	sleep, _ := e.startSleep(context.Background(), "")
	defer sleep.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		e.handler.Close()
	}()
	killedEnd(t, sleep.Receive, sleep.Msg, sleep.Err)
	<-done
	stream, err := e.process().Start(context.Background(), connect.NewRequest(&processpb.StartRequest{
		Process: &processpb.ProcessConfig{Cmd: "true"}}))
	if err == nil {
		defer stream.Close()
		if stream.Receive() {
			t.Fatalf("start after Close sent %v", stream.Msg())
		}
		err = stream.Err()
	}
	if connect.CodeOf(err) != connect.CodeUnavailable {
		t.Fatalf("start after Close: %v, want unavailable", err)
	}
}

// stdin: input sent while the command runs, by SendInput and in order by
// StreamInput, end of file by CloseStdin; refusals for a process without stdin, a
// PTY's input and an unknown process.
func TestStdin(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	yes, no := true, false
	stream, err := e.process().Start(ctx, connect.NewRequest(&processpb.StartRequest{
		Process: &processpb.ProcessConfig{Cmd: "/bin/sh", Args: []string{"-c", `while read l; do echo "got $l"; done; echo bye`}}, Stdin: &yes}))
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	if !stream.Receive() || stream.Msg().GetEvent().GetStart() == nil {
		t.Fatalf("no start event: %v", stream.Err())
	}
	sel := &processpb.ProcessSelector{Selector: &processpb.ProcessSelector_Pid{Pid: stream.Msg().GetEvent().GetStart().GetPid()}}
	next := func() string {
		t.Helper()
		for stream.Receive() {
			if d := stream.Msg().GetEvent().GetData(); d != nil {
				return string(d.GetStdout()) + string(d.GetStderr())
			}
		}
		t.Fatalf("the stream ended: %v", stream.Err())
		return ""
	}
	input := func(s string) *processpb.ProcessInput {
		return &processpb.ProcessInput{Input: &processpb.ProcessInput_Stdin{Stdin: []byte(s)}}
	}

	if _, err := e.process().SendInput(ctx, connect.NewRequest(&processpb.SendInputRequest{Process: sel, Input: input("one\n")})); err != nil {
		t.Fatal(err)
	}
	if got := next(); got != "got one\n" {
		t.Fatalf("after SendInput: %q", got)
	}
	in := e.process().StreamInput(ctx)
	for _, msg := range []*processpb.StreamInputRequest{
		{Event: &processpb.StreamInputRequest_Start{Start: &processpb.StreamInputRequest_StartEvent{Process: sel}}},
		{Event: &processpb.StreamInputRequest_Data{Data: &processpb.StreamInputRequest_DataEvent{Input: input("two\n")}}},
		{Event: &processpb.StreamInputRequest_Keepalive{Keepalive: &processpb.StreamInputRequest_KeepAlive{}}},
		{Event: &processpb.StreamInputRequest_Data{Data: &processpb.StreamInputRequest_DataEvent{Input: input("three\n")}}},
	} {
		if err := in.Send(msg); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := in.CloseAndReceive(); err != nil {
		t.Fatal(err)
	}
	var got string
	for len(got) < len("got two\ngot three\n") {
		got += next()
	}
	if got != "got two\ngot three\n" {
		t.Fatalf("after StreamInput: %q", got)
	}
	_, err = e.process().SendInput(ctx, connect.NewRequest(&processpb.SendInputRequest{Process: sel,
		Input: &processpb.ProcessInput{Input: &processpb.ProcessInput_Pty{Pty: []byte("x")}}}))
	if connect.CodeOf(err) != connect.CodeFailedPrecondition || !strings.Contains(err.Error(), "no terminal") {
		t.Errorf("pty input to a process without a terminal: %v, want failed_precondition", err)
	}
	if _, err := e.process().CloseStdin(ctx, connect.NewRequest(&processpb.CloseStdinRequest{Process: sel})); err != nil {
		t.Fatal(err)
	}
	if got := next(); got != "bye\n" {
		t.Fatalf("after CloseStdin: %q", got)
	}
	var end *processpb.ProcessEvent_EndEvent
	for stream.Receive() {
		if end = stream.Msg().GetEvent().GetEnd(); end != nil {
			break
		}
	}
	if end == nil || end.ExitCode != 0 || !end.Exited {
		t.Fatalf("end %v, %v; want exit 0", end, stream.Err())
	}
	_, err = e.process().SendInput(ctx, connect.NewRequest(&processpb.SendInputRequest{Process: sel, Input: input("late\n")}))
	if connect.CodeOf(err) != connect.CodeNotFound {
		t.Errorf("input after the end: %v, want not_found", err)
	}

	// Started with stdin: false, a command reads end of file, and input is refused.
	cat, err := e.process().Start(ctx, connect.NewRequest(&processpb.StartRequest{Process: &processpb.ProcessConfig{Cmd: "cat"}, Stdin: &no}))
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	end = nil
	for cat.Receive() {
		if e := cat.Msg().GetEvent().GetEnd(); e != nil {
			end = e
		}
	}
	if end == nil || end.ExitCode != 0 {
		t.Errorf("cat without stdin: %v, %v", end, cat.Err())
	}
	s2, err := e.process().Start(ctx, connect.NewRequest(&processpb.StartRequest{
		Process: &processpb.ProcessConfig{Cmd: "sleep", Args: []string{"1000"}}, Stdin: &no}))
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if !s2.Receive() {
		t.Fatal(s2.Err())
	}
	sel2 := &processpb.ProcessSelector{Selector: &processpb.ProcessSelector_Pid{Pid: s2.Msg().GetEvent().GetStart().GetPid()}}
	_, err = e.process().SendInput(ctx, connect.NewRequest(&processpb.SendInputRequest{Process: sel2, Input: input("x")}))
	if connect.CodeOf(err) != connect.CodeFailedPrecondition || !strings.Contains(err.Error(), "stdin: true") {
		t.Errorf("input to a process without stdin: %v", err)
	}
	if _, err := e.process().SendSignal(ctx, connect.NewRequest(&processpb.SendSignalRequest{Process: sel2, Signal: processpb.Signal_SIGNAL_SIGKILL})); err != nil {
		t.Fatal(err)
	}
}

// A process on a terminal: its output as pty data, keys typed by SendInput, a
// resize by Update; stdin input and CloseStdin refused for it.
func TestPTY(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	stream, err := e.process().Start(ctx, connect.NewRequest(&processpb.StartRequest{
		Process: &processpb.ProcessConfig{Cmd: "/bin/sh", Args: []string{"-c", `stty size; read -r l; echo "got $l"; read -r _; stty size`}},
		Pty:     &processpb.PTY{Size: &processpb.PTY_Size{Cols: 100, Rows: 30}}}))
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	if !stream.Receive() || stream.Msg().GetEvent().GetStart() == nil {
		t.Fatalf("no start event: %v", stream.Err())
	}
	sel := &processpb.ProcessSelector{Selector: &processpb.ProcessSelector_Pid{Pid: stream.Msg().GetEvent().GetStart().GetPid()}}
	var out string
	until := func(want string) {
		t.Helper()
		for !strings.Contains(out, want) {
			if !stream.Receive() {
				t.Fatalf("the stream ended before %q: %q, %v", want, out, stream.Err())
			}
			d := stream.Msg().GetEvent().GetData()
			if len(d.GetStdout()) > 0 || len(d.GetStderr()) > 0 {
				t.Fatalf("terminal output as stdout or stderr: %v", d)
			}
			out += strings.ReplaceAll(string(d.GetPty()), "\r\n", "\n")
		}
	}
	keys := func(s string) *processpb.ProcessInput {
		return &processpb.ProcessInput{Input: &processpb.ProcessInput_Pty{Pty: []byte(s)}}
	}
	until("30 100\n")
	_, err = e.process().SendInput(ctx, connect.NewRequest(&processpb.SendInputRequest{Process: sel,
		Input: &processpb.ProcessInput{Input: &processpb.ProcessInput_Stdin{Stdin: []byte("x")}}}))
	if connect.CodeOf(err) != connect.CodeFailedPrecondition {
		t.Errorf("stdin input to a terminal: %v, want failed_precondition", err)
	}
	if _, err := e.process().CloseStdin(ctx, connect.NewRequest(&processpb.CloseStdinRequest{Process: sel})); connect.CodeOf(err) != connect.CodeFailedPrecondition {
		t.Errorf("CloseStdin of a terminal: %v, want failed_precondition", err)
	}
	if _, err := e.process().SendInput(ctx, connect.NewRequest(&processpb.SendInputRequest{Process: sel, Input: keys("hi\r")})); err != nil {
		t.Fatal(err)
	}
	until("got hi\n")
	if _, err := e.process().Update(ctx, connect.NewRequest(&processpb.UpdateRequest{Process: sel,
		Pty: &processpb.PTY{Size: &processpb.PTY_Size{Cols: 120, Rows: 40}}})); err != nil {
		t.Fatal(err)
	}
	if _, err := e.process().SendInput(ctx, connect.NewRequest(&processpb.SendInputRequest{Process: sel, Input: keys("\r")})); err != nil {
		t.Fatal(err)
	}
	until("40 120\n")
	for stream.Receive() {
		if end := stream.Msg().GetEvent().GetEnd(); end != nil {
			if end.ExitCode != 0 {
				t.Errorf("end %v", end)
			}
		}
	}
	// A terminal of no width is refused; a server stream tells on its first Receive.
	bad, err := e.process().Start(ctx, connect.NewRequest(&processpb.StartRequest{
		Process: &processpb.ProcessConfig{Cmd: "true"}, Pty: &processpb.PTY{Size: &processpb.PTY_Size{Cols: 0, Rows: 30}}}))
	if err == nil {
		defer bad.Close()
		if bad.Receive() {
			t.Fatalf("a start with a 0x30 terminal sent %v", bad.Msg())
		}
		err = bad.Err()
	}
	if connect.CodeOf(err) != connect.CodeInvalidArgument {
		t.Errorf("a 0x30 terminal: %v, want invalid_argument", err)
	}
}

// upload posts files as the SDK does: one multipart part "file" per file.
func (e *env) upload(query string, files map[string][]byte) (*http.Response, []map[string]string) {
	e.t.Helper()
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	for name, data := range files {
		w, err := mw.CreateFormFile("file", name)
		if err != nil {
			e.t.Fatal(err)
		}
		w.Write(data)
	}
	mw.Close()
	req, _ := http.NewRequest(http.MethodPost, e.srv.URL+"/files?"+query, &body)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	res, err := e.client(e.sandbox, e.token).Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer res.Body.Close()
	var entries []map[string]string
	if res.StatusCode == http.StatusOK {
		if err := json.NewDecoder(res.Body).Decode(&entries); err != nil {
			e.t.Fatal(err)
		}
	}
	return res, entries
}

func (e *env) download(p string) (int, []byte) {
	e.t.Helper()
	res, err := e.client(e.sandbox, e.token).Get(e.srv.URL + "/files?path=" + p)
	if err != nil {
		e.t.Fatal(err)
	}
	defer res.Body.Close()
	data, err := io.ReadAll(res.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return res.StatusCode, data
}

func TestFilesRoundTrip(t *testing.T) {
	e := newEnv(t)
	binary := make([]byte, 256)
	for i := range binary {
		binary[i] = byte(i)
	}
	// Relative paths are the sandbox's $HOME's, and answers name the absolute path.
	isUnderHome := func(p any, rel string) bool {
		s, _ := p.(string)
		return strings.HasPrefix(s, "/") && strings.HasSuffix(s, "/"+rel)
	}
	res, entries := e.upload("path=notes/hello.txt", map[string][]byte{"hello.txt": []byte("hi there\n")})
	if res.StatusCode != http.StatusOK || len(entries) != 1 || !isUnderHome(entries[0]["path"], "notes/hello.txt") ||
		entries[0]["name"] != "hello.txt" || entries[0]["type"] != "file" {
		t.Fatalf("upload: %d %v", res.StatusCode, entries)
	}
	// Without path=, each part's file name is its path, directories included.
	if res, entries := e.upload("", map[string][]byte{"bin/all.bytes": binary}); res.StatusCode != http.StatusOK || len(entries) != 1 || !isUnderHome(entries[0]["path"], "bin/all.bytes") {
		t.Fatalf("upload by file name: %d %v", res.StatusCode, entries)
	}
	if code, data := e.download("notes/hello.txt"); code != http.StatusOK || string(data) != "hi there\n" {
		t.Fatalf("download text: %d %q", code, data)
	}
	if code, data := e.download("bin/all.bytes"); code != http.StatusOK || !bytes.Equal(data, binary) {
		t.Fatalf("download binary: %d, %d bytes", code, len(data))
	}
	if code, _ := e.download("missing.txt"); code != http.StatusNotFound {
		t.Fatalf("download of a missing file: %d, want 404", code)
	}
}

func TestFilesystem(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	fs := e.files()
	e.upload("path=a/one.txt", map[string][]byte{"f": []byte("1")})
	e.upload("path=a/b/two.txt", map[string][]byte{"f": []byte("22")})

	// Relative paths are the sandbox's $HOME's, and answers name the absolute path,
	// whatever the adapter's FileInfo.Path is relative to.
	home, _, _ := e.run(&processpb.ProcessConfig{Cmd: "sh", Args: []string{"-c", `printf %s "$HOME"`}})
	if !strings.HasPrefix(home, "/") {
		t.Fatalf("the sandbox's home is %q", home)
	}
	st, err := fs.Stat(ctx, connect.NewRequest(&filesystempb.StatRequest{Path: "a/b/two.txt"}))
	if err != nil {
		t.Fatal(err)
	}
	if en := st.Msg.Entry; en.Name != "two.txt" || en.Type != filesystempb.FileType_FILE_TYPE_FILE || en.Size != 2 || en.Path != home+"/a/b/two.txt" {
		t.Fatalf("stat: %v", en)
	}
	if _, err := fs.Stat(ctx, connect.NewRequest(&filesystempb.StatRequest{Path: "a/nope"})); connect.CodeOf(err) != connect.CodeNotFound {
		t.Fatalf("stat of a missing file: %v, want not_found", err)
	}

	names := func(depth uint32) []string {
		t.Helper()
		res, err := fs.ListDir(ctx, connect.NewRequest(&filesystempb.ListDirRequest{Path: "a", Depth: depth}))
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, en := range res.Msg.Entries {
			out = append(out, strings.TrimPrefix(en.Path, home+"/")+":"+strings.TrimPrefix(en.Type.String(), "FILE_TYPE_"))
		}
		return out
	}
	if got := strings.Join(names(1), " "); got != "a/b:DIRECTORY a/one.txt:FILE" {
		t.Fatalf("depth 1: %s", got)
	}
	if got := strings.Join(names(2), " "); got != "a/b:DIRECTORY a/one.txt:FILE a/b/two.txt:FILE" {
		t.Fatalf("depth 2: %s", got)
	}

	md, err := fs.MakeDir(ctx, connect.NewRequest(&filesystempb.MakeDirRequest{Path: "x/y"}))
	if err != nil || md.Msg.Entry.Type != filesystempb.FileType_FILE_TYPE_DIRECTORY || md.Msg.Entry.Path != home+"/x/y" {
		t.Fatalf("make dir: %v, %v", md, err)
	}
	if _, err := fs.MakeDir(ctx, connect.NewRequest(&filesystempb.MakeDirRequest{Path: "x/y"})); connect.CodeOf(err) != connect.CodeAlreadyExists {
		t.Fatalf("make dir again: %v, want already_exists", err)
	}

	mv, err := fs.Move(ctx, connect.NewRequest(&filesystempb.MoveRequest{Source: "a/one.txt", Destination: "x/y/z/moved.txt"}))
	if err != nil || mv.Msg.Entry.Name != "moved.txt" || mv.Msg.Entry.Size != 1 {
		t.Fatalf("move: %v, %v", mv, err)
	}
	if code, data := e.download("x/y/z/moved.txt"); code != http.StatusOK || string(data) != "1" {
		t.Fatalf("moved file: %d %q", code, data)
	}
	if _, err := fs.Move(ctx, connect.NewRequest(&filesystempb.MoveRequest{Source: "a/one.txt", Destination: "b"})); connect.CodeOf(err) != connect.CodeNotFound {
		t.Fatalf("move of a missing file: %v, want not_found", err)
	}

	if _, err := fs.Remove(ctx, connect.NewRequest(&filesystempb.RemoveRequest{Path: "a"})); err != nil {
		t.Fatal(err)
	}
	if _, err := fs.Stat(ctx, connect.NewRequest(&filesystempb.StatRequest{Path: "a"})); connect.CodeOf(err) != connect.CodeNotFound {
		t.Fatalf("stat of a removed directory: %v, want not_found", err)
	}
}

func TestHealth(t *testing.T) {
	e := newEnv(t)
	status := func(sandbox, token string) int {
		t.Helper()
		res, err := e.client(sandbox, token).Get(e.srv.URL + "/health")
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	if got := status(e.sandbox, e.token); got != http.StatusNoContent {
		t.Fatalf("running sandbox: %d, want 204", got)
	}
	if got := status("sbx_unknown", "whatever"); got != http.StatusBadGateway {
		t.Fatalf("unknown sandbox: %d, want 502", got)
	}
	if _, err := e.svc.Operate(context.Background(), alice, e.sandbox, lifecycle.OpStop); err != nil {
		t.Fatal(err)
	}
	if got := status(e.sandbox, e.token); got != http.StatusBadGateway {
		t.Fatalf("stopped sandbox: %d, want 502", got)
	}
}

func TestAuthentication(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	for name, token := range map[string]string{"no token": "", "wrong token": "nope"} {
		pc := processpbconnect.NewProcessClient(e.client(e.sandbox, token), e.srv.URL, connect.WithProtoJSON())
		if _, err := pc.List(ctx, connect.NewRequest(&processpb.ListRequest{})); connect.CodeOf(err) != connect.CodeUnauthenticated {
			t.Fatalf("%s: list: %v, want unauthenticated", name, err)
		}
		stream, err := pc.Start(ctx, connect.NewRequest(&processpb.StartRequest{Process: &processpb.ProcessConfig{Cmd: "true"}}))
		if err == nil {
			for stream.Receive() {
				t.Fatalf("%s: start sent %v", name, stream.Msg())
			}
			err = stream.Err()
		}
		if connect.CodeOf(err) != connect.CodeUnauthenticated {
			t.Fatalf("%s: start: %v, want unauthenticated", name, err)
		}
		res, err := e.client(e.sandbox, token).Get(e.srv.URL + "/files?path=x")
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusUnauthorized {
			t.Fatalf("%s: download: %d, want 401", name, res.StatusCode)
		}
	}
	// A token is good for its own sandbox only.
	fc := filesystempbconnect.NewFilesystemClient(e.client("sbx_other", e.token), e.srv.URL, connect.WithProtoJSON())
	_, err := fc.Stat(ctx, connect.NewRequest(&filesystempb.StatRequest{Path: "."}))
	var ce *connect.Error
	if !errors.As(err, &ce) || ce.Code() == 0 {
		t.Fatalf("another sandbox: %v, want a refusal", err)
	}
}

// envelopes splits a Connect streaming body into its envelopes' flags and JSON.
func envelopes(t *testing.T, body []byte) (flags []byte, msgs []string) {
	t.Helper()
	for len(body) > 0 {
		if len(body) < 5 {
			t.Fatalf("a cut envelope: %q", body)
		}
		n := int(body[1])<<24 | int(body[2])<<16 | int(body[3])<<8 | int(body[4])
		if len(body) < 5+n {
			t.Fatalf("a cut envelope: %q", body)
		}
		flags, msgs = append(flags, body[0]), append(msgs, string(body[5:5+n]))
		body = body[5+n:]
	}
	return flags, msgs
}

// The SDK's reading of the wire, byte for byte where it matters: JSON envelopes, the
// start event first, exitCode left out when 0, an end-of-stream envelope, and
// not_found as the code of a unary error.
func TestWireFormat(t *testing.T) {
	e := newEnv(t)
	post := func(path, contentType string, body []byte) (*http.Response, []byte) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, e.srv.URL+path, bytes.NewReader(body))
		req.Header.Set("Content-Type", contentType)
		req.Header.Set("Connect-Protocol-Version", "1")
		res, err := e.client(e.sandbox, e.token).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		data, err := io.ReadAll(res.Body)
		if err != nil {
			t.Fatal(err)
		}
		return res, data
	}
	for _, tc := range []struct {
		script, end string
	}{
		{"printf hi; exit 7", `{"event":{"end":{"exitCode":7,"exited":true,"status":"exit status 7"}}}`},
		{"printf hi", `{"event":{"end":{"exited":true,"status":"exit status 0"}}}`},
	} {
		msg, _ := json.Marshal(map[string]any{"process": map[string]any{"cmd": "/bin/sh", "args": []string{"-c", tc.script}}})
		frame := append([]byte{0, 0, 0, 0, byte(len(msg))}, msg...)
		res, body := post("/process.Process/Start", "application/connect+json", frame)
		if res.StatusCode != http.StatusOK || res.Header.Get("Content-Type") != "application/connect+json" {
			t.Fatalf("start: %d %s", res.StatusCode, res.Header.Get("Content-Type"))
		}
		flags, msgs := envelopes(t, body)
		compact := make([]string, len(msgs))
		for i, m := range msgs {
			var buf bytes.Buffer
			if err := json.Compact(&buf, []byte(m)); err != nil {
				t.Fatalf("envelope %d: %q: %v", i, m, err)
			}
			compact[i] = buf.String()
		}
		want := []string{`{"event":{"start":{"pid":` + strings.TrimPrefix(compact[0], `{"event":{"start":{"pid":`),
			`{"event":{"data":{"stdout":"aGk="}}}`, tc.end, `{}`}
		if !strings.HasPrefix(compact[0], `{"event":{"start":{"pid":`) || strings.Join(compact, "\n") != strings.Join(want, "\n") ||
			!bytes.Equal(flags, []byte{0, 0, 0, 2}) {
			t.Fatalf("%s: flags %v, envelopes\n%s\nwant\n%s", tc.script, flags, strings.Join(compact, "\n"), strings.Join(want, "\n"))
		}
	}
	res, body := post("/filesystem.Filesystem/Stat", "application/json", []byte(`{"path":"missing"}`))
	var ce struct{ Code string }
	if err := json.Unmarshal(body, &ce); err != nil || res.StatusCode != http.StatusNotFound || ce.Code != "not_found" {
		t.Fatalf("stat of a missing file: %d %s", res.StatusCode, body)
	}
}

func TestKeepalive(t *testing.T) {
	e := newEnv(t)
	tick := make(chan time.Time)
	asked := make(chan time.Duration, 1)
	envd.SetTicker(e.handler, func(d time.Duration) (<-chan time.Time, func()) {
		asked <- d
		return tick, func() {}
	})
	req := connect.NewRequest(&processpb.StartRequest{Process: &processpb.ProcessConfig{Cmd: "sleep", Args: []string{"1000"}}})
	req.Header().Set("Keepalive-Ping-Interval", "50")
	stream, err := e.process().Start(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	if !stream.Receive() || stream.Msg().GetEvent().GetStart() == nil {
		t.Fatalf("no start event: %v", stream.Err())
	}
	if d := <-asked; d != 50*time.Second {
		t.Fatalf("keepalive every %v, want 50s", d)
	}
	tick <- time.Time{}
	if !stream.Receive() || stream.Msg().GetEvent().GetKeepalive() == nil {
		t.Fatalf("after a tick: %v (%v), want a keepalive", stream.Msg(), stream.Err())
	}
	// Close kills the sleep.
}
