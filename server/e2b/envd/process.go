package envd

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"connectrpc.com/connect"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/server/e2b/envd/gen/processpb"
	"github.com/different-ai/differently/server/sandboxes"
)

// errKilled is why a process was cancelled by SendSignal or Close.
var errKilled = errors.New("killed")

// subscriberBuffer is how many output events wait for a slow reader before the
// process itself waits for it, as a command writing to a full pipe does.
const subscriberBuffer = 64

// registry holds the processes started through the front door and still running,
// per sandbox, under pids it assigns. Their commands run on its context, not on the
// request's: as envd's, a process outlives the stream that started it, and ends by
// itself, by SendSignal, by its timeout or by Close.
type registry struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	closed  bool
	lastPID uint32
	procs   map[string]map[uint32]*process
}

func newRegistry() *registry {
	ctx, cancel := context.WithCancelCause(context.Background())
	return &registry{ctx: ctx, cancel: cancel, procs: map[string]map[uint32]*process{}}
}

// process is one command started through the front door.
type process struct {
	pid     uint32
	sandbox string
	config  *processpb.ProcessConfig
	tag     *string
	ctx     context.Context
	kill    context.CancelCauseFunc

	// stdin feeds the command's stdin while it runs; nil when it was started
	// without. stdinMu keeps a close from racing a send: senders hold it shared.
	stdin       chan []byte
	stdinMu     sync.RWMutex
	stdinClosed bool
	// pty, when set, is the terminal the process runs on: stdin then carries
	// its typed keys, and resize its new sizes.
	pty    *adapters.TermSize
	resize chan adapters.TermSize

	mu   sync.Mutex
	subs map[*subscriber]struct{}
	end  *processpb.ProcessEvent_EndEvent
	// done is closed once end is set, after the last output event was published.
	done chan struct{}
}

// subscriber is one stream relaying a process's events.
type subscriber struct {
	ch   chan *processpb.ProcessEvent
	gone chan struct{}
}

// add registers a process about to run in sandbox; max bounds the sandbox's running
// processes.
func (r *registry) add(sandbox string, cfg *processpb.ProcessConfig, tag *string, timeout time.Duration, max int, stdin bool, pty *adapters.TermSize) (*process, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, connect.NewError(connect.CodeUnavailable, errors.New("the envd front door is shutting down"))
	}
	procs := r.procs[sandbox]
	if len(procs) >= max {
		return nil, connect.NewError(connect.CodeResourceExhausted, fmt.Errorf("sandbox %s already runs %d processes started through envd", sandbox, len(procs)))
	}
	if procs == nil {
		procs = map[uint32]*process{}
		r.procs[sandbox] = procs
	}
	for {
		r.lastPID++
		if r.lastPID == 0 {
			continue
		}
		if _, taken := procs[r.lastPID]; !taken {
			break
		}
	}
	ctx, kill := context.WithCancelCause(r.ctx)
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		k := kill
		kill = func(err error) { k(err); cancel() }
	}
	p := &process{pid: r.lastPID, sandbox: sandbox, config: cfg, tag: tag, ctx: ctx, kill: kill,
		subs: map[*subscriber]struct{}{}, done: make(chan struct{})}
	if stdin || pty != nil {
		p.stdin = make(chan []byte)
	}
	if pty != nil {
		p.pty, p.resize = pty, make(chan adapters.TermSize)
	}
	procs[p.pid] = p
	r.wg.Add(1)
	return p, nil
}

// run runs cmd as p until it ends, then unregisters p.
func (r *registry) run(p *process, cmd *sandboxes.Command) {
	go func() {
		defer r.wg.Done()
		defer p.kill(nil)
		var final api.ExecEvent
		var err error
		switch {
		case p.pty != nil:
			final, err = cmd.StreamPTY(p.ctx, *p.pty, p.stdin, p.resize, &output{p: p, pty: true})
		case p.stdin != nil:
			final, err = cmd.StreamStdin(p.ctx, p.stdin, &output{p: p})
		default:
			final, err = cmd.Stream(p.ctx, &output{p: p})
		}
		end := endEvent(final, err, p.ctx.Err() != nil)
		// Unregistered before its end is told, so that a List after the end event
		// no longer shows it.
		r.mu.Lock()
		delete(r.procs[p.sandbox], p.pid)
		if len(r.procs[p.sandbox]) == 0 {
			delete(r.procs, p.sandbox)
		}
		r.mu.Unlock()
		p.finish(end)
	}()
}

// find returns a running process of sandbox by pid or tag.
func (r *registry) find(sandbox string, sel *processpb.ProcessSelector) (*process, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch s := sel.GetSelector().(type) {
	case *processpb.ProcessSelector_Pid:
		if p, ok := r.procs[sandbox][s.Pid]; ok {
			return p, nil
		}
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("process with pid %d not found", s.Pid))
	case *processpb.ProcessSelector_Tag:
		for _, p := range r.procs[sandbox] {
			if p.tag != nil && *p.tag == s.Tag {
				return p, nil
			}
		}
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("process with tag %q not found", s.Tag))
	}
	return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("a process selector (pid or tag) is required"))
}

func (r *registry) list(sandbox string) []*processpb.ProcessInfo {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]*processpb.ProcessInfo, 0, len(r.procs[sandbox]))
	for _, p := range r.procs[sandbox] {
		out = append(out, &processpb.ProcessInfo{Config: p.config, Pid: p.pid, Tag: p.tag})
	}
	return out
}

func (r *registry) close() {
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	r.cancel(errKilled)
	r.wg.Wait()
}

// errNoStdin is the answer to input for a process started without stdin.
var errNoStdin = connect.NewError(connect.CodeFailedPrecondition, errors.New("the process was started without stdin (start it with stdin: true)"))

// write hands data to the command's stdin, waiting while the command has not read
// what came before, as a write to a full pipe does.
func (p *process) write(ctx context.Context, data []byte) error {
	if p.stdin == nil {
		return errNoStdin
	}
	p.stdinMu.RLock()
	defer p.stdinMu.RUnlock()
	if p.stdinClosed {
		return connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("the stdin of process %d is closed", p.pid))
	}
	select {
	case p.stdin <- data:
		return nil
	case <-p.done:
		return connect.NewError(connect.CodeNotFound, fmt.Errorf("process with pid %d has ended", p.pid))
	case <-ctx.Done():
		return connect.NewError(connect.CodeCanceled, ctx.Err())
	}
}

// setSize resizes the process's terminal.
func (p *process) setSize(ctx context.Context, size adapters.TermSize) error {
	if p.pty == nil {
		return connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("process %d has no terminal to resize", p.pid))
	}
	select {
	case p.resize <- size:
		return nil
	case <-p.done:
		return connect.NewError(connect.CodeNotFound, fmt.Errorf("process with pid %d has ended", p.pid))
	case <-ctx.Done():
		return connect.NewError(connect.CodeCanceled, ctx.Err())
	}
}

// closeStdin ends the command's stdin: it reads end of file.
func (p *process) closeStdin() error {
	if p.pty != nil {
		return connect.NewError(connect.CodeFailedPrecondition, errors.New("a terminal has no stdin to close: send Ctrl-D (0x04) as its input"))
	}
	if p.stdin == nil {
		return errNoStdin
	}
	p.stdinMu.Lock()
	defer p.stdinMu.Unlock()
	if !p.stdinClosed {
		p.stdinClosed = true
		close(p.stdin)
	}
	return nil
}

func (p *process) subscribe() *subscriber {
	s := &subscriber{ch: make(chan *processpb.ProcessEvent, subscriberBuffer), gone: make(chan struct{})}
	p.mu.Lock()
	p.subs[s] = struct{}{}
	p.mu.Unlock()
	return s
}

func (p *process) unsubscribe(s *subscriber) {
	p.mu.Lock()
	delete(p.subs, s)
	p.mu.Unlock()
	close(s.gone)
}

// publish hands ev to every subscriber. Output nobody is attached to is lost, as
// envd's; a subscriber that neither reads nor leaves holds the process up, unless
// the process is killed.
func (p *process) publish(ev *processpb.ProcessEvent) {
	p.mu.Lock()
	subs := make([]*subscriber, 0, len(p.subs))
	for s := range p.subs {
		subs = append(subs, s)
	}
	p.mu.Unlock()
	for _, s := range subs {
		select {
		case s.ch <- ev:
		case <-s.gone:
		case <-p.ctx.Done():
		}
	}
}

func (p *process) finish(end *processpb.ProcessEvent_EndEvent) {
	p.mu.Lock()
	p.end = end
	p.mu.Unlock()
	close(p.done)
}

// relay sends p's events to one stream from now until p's end or the client's
// departure; the first event is start, as the SDK requires.
// tick, when not nil, asks for a keepalive event, so that a stream of a quiet command
// is not taken for a dead one on the way.
func relay(ctx context.Context, p *process, s *subscriber, tick <-chan time.Time, send func(*processpb.ProcessEvent) error) error {
	defer p.unsubscribe(s)
	if err := send(&processpb.ProcessEvent{Event: &processpb.ProcessEvent_Start{Start: &processpb.ProcessEvent_StartEvent{Pid: p.pid}}}); err != nil {
		return err
	}
	for {
		select {
		case ev := <-s.ch:
			if err := send(ev); err != nil {
				return err
			}
		case <-p.done:
			// Every event published went into s.ch before done was closed.
			for {
				select {
				case ev := <-s.ch:
					if err := send(ev); err != nil {
						return err
					}
				default:
					return send(&processpb.ProcessEvent{Event: &processpb.ProcessEvent_End{End: p.end}})
				}
			}
		case <-tick:
			if err := send(&processpb.ProcessEvent{Event: &processpb.ProcessEvent_Keepalive{Keepalive: &processpb.ProcessEvent_KeepAlive{}}}); err != nil {
				return err
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// keepaliveHeader is how the SDK asks for keepalive events, every so many seconds.
const keepaliveHeader = "Keepalive-Ping-Interval"

// keepalive is the ticker a stream asked for with keepaliveHeader, nil when none.
func (h *Handler) keepalive(hdr http.Header) (<-chan time.Time, func()) {
	secs, err := strconv.Atoi(hdr.Get(keepaliveHeader))
	if err != nil || secs <= 0 {
		return nil, func() {}
	}
	return h.newTicker(time.Duration(secs) * time.Second)
}

func realTicker(d time.Duration) (<-chan time.Time, func()) {
	t := time.NewTicker(d)
	return t.C, t.Stop
}

// output publishes a command's output as data events.
type output struct {
	p   *process
	pty bool // a terminal's output, one stream
}

func (o *output) Emit(ev api.ExecEvent) error { return o.EmitBytes(ev.Stream, []byte(ev.Data)) }

func (o *output) EmitBytes(stream string, data []byte) error {
	b := append([]byte(nil), data...)
	var d processpb.ProcessEvent_DataEvent
	switch {
	case o.pty:
		d.Output = &processpb.ProcessEvent_DataEvent_Pty{Pty: b}
	case stream == api.StreamStderr:
		d.Output = &processpb.ProcessEvent_DataEvent_Stderr{Stderr: b}
	default:
		d.Output = &processpb.ProcessEvent_DataEvent_Stdout{Stdout: b}
	}
	o.p.publish(&processpb.ProcessEvent{Event: &processpb.ProcessEvent_Data{Data: &d}})
	return nil
}

// endEvent is how envd reports an end: a killed process (by SendSignal, its
// timeout, or the adapter's) as a SIGKILLed one, -1 and "signal: killed".
func endEvent(final api.ExecEvent, err error, killed bool) *processpb.ProcessEvent_EndEvent {
	switch {
	case killed || err == nil && final.TimedOut:
		return &processpb.ProcessEvent_EndEvent{ExitCode: -1, Status: "signal: killed"}
	case err != nil:
		msg := api.Message(err)
		return &processpb.ProcessEvent_EndEvent{ExitCode: -1, Status: "error", Error: &msg}
	case final.ExitCode == nil:
		msg := final.Error
		return &processpb.ProcessEvent_EndEvent{ExitCode: -1, Status: "error", Error: &msg}
	}
	code := *final.ExitCode
	return &processpb.ProcessEvent_EndEvent{ExitCode: int32(code), Exited: true, Status: "exit status " + strconv.Itoa(code)}
}

// processService is process.Process.
type processService struct{ h *Handler }

// timeoutOf is the request's Connect timeout, which bounds the process as envd's
// does; without one the process may run as long as the exec contract allows.
func timeoutOf(hdr http.Header) (time.Duration, error) {
	v := hdr.Get("Connect-Timeout-Ms")
	if v == "" {
		return 0, nil
	}
	ms, err := strconv.ParseInt(v, 10, 64)
	if err != nil || ms < 0 {
		return 0, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("bad Connect-Timeout-Ms %q", v))
	}
	return time.Duration(ms) * time.Millisecond, nil
}

func (s *processService) Start(ctx context.Context, req *connect.Request[processpb.StartRequest], stream *connect.ServerStream[processpb.StartResponse]) error {
	h := s.h
	c, id, err := h.caller(ctx, req.Header())
	if err != nil {
		return connectError(err)
	}
	var term *adapters.TermSize
	if req.Msg.Pty != nil {
		size, err := termSize(req.Msg.Pty)
		if err != nil {
			return err
		}
		term = &size
	}
	cfg := req.Msg.GetProcess()
	if cfg.GetCmd() == "" {
		return connect.NewError(connect.CodeInvalidArgument, errors.New("process.cmd is required"))
	}
	timeout, err := timeoutOf(req.Header())
	if err != nil {
		return err
	}
	cwd, err := h.resolve(ctx, c, id, cfg.GetCwd())
	if err != nil {
		return connectError(err)
	}
	ereq := api.ExecRequest{Args: append([]string{cfg.Cmd}, cfg.Args...), Env: cfg.Envs, Cwd: cwd,
		TimeoutSeconds: api.MaxExecTimeoutSeconds}
	if timeout > 0 {
		ereq.TimeoutSeconds = int(min((timeout+time.Second-1)/time.Second, api.MaxExecTimeoutSeconds))
	}
	cmd, err := h.svc.Command(ctx, c, id, ereq)
	if err != nil {
		return connectError(err)
	}
	// envd keeps stdin open unless asked not to (the SDKs say stdin: false unless
	// their caller wants it). Asked for, on a pool that cannot feed a running
	// command, it is refused; merely not refused, such a pool runs the command with
	// stdin at end of file, as before the field existed.
	feed := false
	if term != nil {
		// A terminal takes typed keys; its stdin is the terminal's.
		if err := cmd.CanUsePTY(); err != nil {
			return connectError(err)
		}
	} else {
		stdinErr := cmd.CanFeedStdin()
		if req.Msg.Stdin != nil && *req.Msg.Stdin && stdinErr != nil {
			return connectError(stdinErr)
		}
		feed = stdinErr == nil && (req.Msg.Stdin == nil || *req.Msg.Stdin)
	}
	p, err := h.procs.add(id, cfg, req.Msg.Tag, timeout, h.opts.MaxProcesses, feed, term)
	if err != nil {
		return err
	}
	sub := p.subscribe()
	h.procs.run(p, cmd)
	tick, stop := h.keepalive(req.Header())
	defer stop()
	return relay(ctx, p, sub, tick, func(ev *processpb.ProcessEvent) error {
		return stream.Send(&processpb.StartResponse{Event: ev})
	})
}

func (s *processService) Connect(ctx context.Context, req *connect.Request[processpb.ConnectRequest], stream *connect.ServerStream[processpb.ConnectResponse]) error {
	_, id, err := s.h.caller(ctx, req.Header())
	if err != nil {
		return connectError(err)
	}
	p, err := s.h.procs.find(id, req.Msg.GetProcess())
	if err != nil {
		return err
	}
	tick, stop := s.h.keepalive(req.Header())
	defer stop()
	return relay(ctx, p, p.subscribe(), tick, func(ev *processpb.ProcessEvent) error {
		return stream.Send(&processpb.ConnectResponse{Event: ev})
	})
}

func (s *processService) List(ctx context.Context, req *connect.Request[processpb.ListRequest]) (*connect.Response[processpb.ListResponse], error) {
	_, id, err := s.h.caller(ctx, req.Header())
	if err != nil {
		return nil, connectError(err)
	}
	return connect.NewResponse(&processpb.ListResponse{Processes: s.h.procs.list(id)}), nil
}

// process is the caller's running process that sel names.
func (s *processService) process(ctx context.Context, hdr http.Header, sel *processpb.ProcessSelector) (*process, error) {
	_, id, err := s.h.caller(ctx, hdr)
	if err != nil {
		return nil, connectError(err)
	}
	return s.h.procs.find(id, sel)
}

func (s *processService) SendSignal(ctx context.Context, req *connect.Request[processpb.SendSignalRequest]) (*connect.Response[processpb.SendSignalResponse], error) {
	_, id, err := s.h.caller(ctx, req.Header())
	if err != nil {
		return nil, connectError(err)
	}
	switch req.Msg.Signal {
	case processpb.Signal_SIGNAL_SIGKILL, processpb.Signal_SIGNAL_SIGTERM:
	default:
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("signal %s is not one of SIGKILL and SIGTERM", req.Msg.Signal))
	}
	p, err := s.h.procs.find(id, req.Msg.GetProcess())
	if err != nil {
		return nil, err
	}
	// The exec contract stops a command only by cancelling it, which kills it: a
	// SIGTERM is a kill too, without the grace a real SIGTERM would give.
	p.kill(errKilled)
	return connect.NewResponse(&processpb.SendSignalResponse{}), nil
}

// inputOf is the bytes of an input for p: stdin for a process on pipes, pty for one
// on a terminal.
func inputOf(p *process, in *processpb.ProcessInput) ([]byte, error) {
	switch v := in.GetInput().(type) {
	case *processpb.ProcessInput_Stdin:
		if p.pty != nil {
			return nil, connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("process %d runs on a terminal: send its input as pty", p.pid))
		}
		return v.Stdin, nil
	case *processpb.ProcessInput_Pty:
		if p.pty == nil {
			return nil, connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("process %d has no terminal: send its input as stdin", p.pid))
		}
		return v.Pty, nil
	}
	return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("input (stdin or pty) is required"))
}

func (s *processService) SendInput(ctx context.Context, req *connect.Request[processpb.SendInputRequest]) (*connect.Response[processpb.SendInputResponse], error) {
	p, err := s.process(ctx, req.Header(), req.Msg.GetProcess())
	if err != nil {
		return nil, err
	}
	data, err := inputOf(p, req.Msg.GetInput())
	if err != nil {
		return nil, err
	}
	if err := p.write(ctx, data); err != nil {
		return nil, err
	}
	return connect.NewResponse(&processpb.SendInputResponse{}), nil
}

// StreamInput is input in order: a start naming the process, then data, until the
// client ends the stream (which does not close the command's stdin).
func (s *processService) StreamInput(ctx context.Context, stream *connect.ClientStream[processpb.StreamInputRequest]) (*connect.Response[processpb.StreamInputResponse], error) {
	_, id, err := s.h.caller(ctx, stream.RequestHeader())
	if err != nil {
		return nil, connectError(err)
	}
	var p *process
	for stream.Receive() {
		switch ev := stream.Msg().GetEvent().(type) {
		case *processpb.StreamInputRequest_Start:
			if p != nil {
				return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("a second start event in one input stream"))
			}
			if p, err = s.h.procs.find(id, ev.Start.GetProcess()); err != nil {
				return nil, err
			}
		case *processpb.StreamInputRequest_Data:
			if p == nil {
				return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("data before the start event that names the process"))
			}
			data, err := inputOf(p, ev.Data.GetInput())
			if err != nil {
				return nil, err
			}
			if err := p.write(ctx, data); err != nil {
				return nil, err
			}
		case *processpb.StreamInputRequest_Keepalive:
		default:
			return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("an input stream event is start, data or keepalive"))
		}
	}
	if err := stream.Err(); err != nil {
		return nil, err
	}
	return connect.NewResponse(&processpb.StreamInputResponse{}), nil
}

func (s *processService) CloseStdin(ctx context.Context, req *connect.Request[processpb.CloseStdinRequest]) (*connect.Response[processpb.CloseStdinResponse], error) {
	p, err := s.process(ctx, req.Header(), req.Msg.GetProcess())
	if err != nil {
		return nil, err
	}
	if err := p.closeStdin(); err != nil {
		return nil, err
	}
	return connect.NewResponse(&processpb.CloseStdinResponse{}), nil
}

func (s *processService) Update(ctx context.Context, req *connect.Request[processpb.UpdateRequest]) (*connect.Response[processpb.UpdateResponse], error) {
	p, err := s.process(ctx, req.Header(), req.Msg.GetProcess())
	if err != nil {
		return nil, err
	}
	if req.Msg.Pty != nil {
		size, err := termSize(req.Msg.Pty)
		if err != nil {
			return nil, err
		}
		if err := p.setSize(ctx, size); err != nil {
			return nil, err
		}
	}
	return connect.NewResponse(&processpb.UpdateResponse{}), nil
}

// termSize is a PTY message's size, which must fit a terminal's.
func termSize(pty *processpb.PTY) (adapters.TermSize, error) {
	cols, rows := pty.GetSize().GetCols(), pty.GetSize().GetRows()
	if cols == 0 || rows == 0 || cols > 1<<15 || rows > 1<<15 {
		return adapters.TermSize{}, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("pty size %dx%d: columns and rows must be from 1 to 32768", cols, rows))
	}
	return adapters.TermSize{Cols: uint16(cols), Rows: uint16(rows)}, nil
}
