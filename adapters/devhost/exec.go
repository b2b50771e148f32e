package devhost

import (
	"context"
	"errors"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/api"
)

const (
	// DefaultExecTimeout applies when a request sets no timeoutSeconds.
	DefaultExecTimeout = 10 * time.Minute
	// minRead and maxRead bound the buffer output is read into, and so the size of
	// one output event. A read takes what the pipe holds and waits only while it is
	// empty, so small output goes out at once; the buffer doubles after each read
	// that fills it, which happens when output arrives faster than it is forwarded.
	minRead = 32 << 10
	maxRead = 1 << 20
	// pipeSize is the capacity asked of the kernel for stdout and stderr (Linux):
	// a read can take no more than the pipe holds, 64 KiB by default. Four times
	// that makes a fast stream's events four times fewer; more gains little, and
	// the pages count against the user's fs.pipe-user-pages-soft (64 MiB), past
	// which the kernel gives that user's new pipes a single page.
	pipeSize = 256 << 10
	// pipeGrace bounds how long output is awaited after the command has exited and
	// its process group has been killed. Only a process that left the group (setsid)
	// can still hold the pipes then; it must not hold Exec hostage.
	pipeGrace = 2 * time.Second
	// fallbackPATH is used when the daemon itself has no PATH.
	fallbackPATH = "/usr/local/bin:/usr/bin:/bin"
)

// Exec implements adapters.ExecutionAdapter.
func (a *Adapter) Exec(ctx context.Context, ref string, req api.ExecRequest) (_ api.ExecResult, err error) {
	defer a.rename(&err)
	var stdout, stderr adapters.OutputBuffer
	began := time.Now()
	st, err := a.run(ctx, ref, req, func(stream string, data []byte) error {
		if stream == api.StreamStdout {
			_, _ = stdout.Write(data)
		} else {
			_, _ = stderr.Write(data)
		}
		return nil
	}, nil)
	if err != nil {
		return api.ExecResult{}, err
	}
	return api.ExecResult{
		ExitCode:   st.Code,
		Stdout:     stdout.String(),
		Stderr:     stderr.String(),
		DurationMs: time.Since(began).Milliseconds(),
		Truncated:  stdout.Truncated() || stderr.Truncated(),
		TimedOut:   st.TimedOut,
	}, nil
}

// ExecStream implements adapters.Streamer. An error returned by emit is returned
// unchanged, as the contract asks, after the command has been killed.
func (a *Adapter) ExecStream(ctx context.Context, ref string, req api.ExecRequest, emit func(api.ExecEvent) error) (_ adapters.ExitStatus, err error) {
	defer a.rename(&err)
	return a.run(ctx, ref, req, func(stream string, data []byte) error {
		return emit(api.ExecEvent{Stream: stream, Data: string(data)})
	}, nil)
}

// ExecStreamBytes implements adapters.ByteStreamer: data is the read buffer itself.
func (a *Adapter) ExecStreamBytes(ctx context.Context, ref string, req api.ExecRequest, emit func(stream string, data []byte) error) (_ adapters.ExitStatus, err error) {
	defer a.rename(&err)
	return a.run(ctx, ref, req, emit, nil)
}

// ExecStdin implements adapters.StdinStreamer.
func (a *Adapter) ExecStdin(ctx context.Context, ref string, req api.ExecRequest, stdin <-chan []byte, emit func(stream string, data []byte) error) (_ adapters.ExitStatus, err error) {
	defer a.rename(&err)
	if req.Stdin != "" {
		return adapters.ExitStatus{}, adapters.InvalidRequest("devhost: a command fed stdin while it runs takes none up front")
	}
	if stdin == nil {
		return adapters.ExitStatus{}, adapters.InvalidRequest("devhost: ExecStdin needs a stdin channel")
	}
	return a.run(ctx, ref, req, emit, stdin)
}

// ExecPTY implements adapters.PTYExec.
func (a *Adapter) ExecPTY(ctx context.Context, ref string, req api.ExecRequest, size adapters.TermSize, input <-chan []byte,
	resize <-chan adapters.TermSize, emit func(stream string, data []byte) error) (_ adapters.ExitStatus, err error) {
	defer a.rename(&err)
	if req.Stdin != "" {
		return adapters.ExitStatus{}, adapters.InvalidRequest("devhost: a command on a terminal takes its input as keys, not stdin up front")
	}
	if size.Cols == 0 || size.Rows == 0 {
		return adapters.ExitStatus{}, adapters.InvalidRequest("devhost: a terminal needs columns and rows, got %dx%d", size.Cols, size.Rows)
	}
	if input == nil {
		input = make(chan []byte) // never sends
	}
	return a.runOn(ctx, ref, req, emit, input, &terminal{size: size, resize: resize})
}

// terminal is what a command on a PTY has beyond a piped one: its size, and
// where new sizes come from.
type terminal struct {
	size   adapters.TermSize
	resize <-chan adapters.TermSize
}

// sink receives output chunks, always from the goroutine that called run.
type sink func(stream string, data []byte) error

// run is the one implementation behind Exec, ExecStream and ExecStdin; stdin is
// ExecStdin's, nil for the others.
func (a *Adapter) run(ctx context.Context, ref string, req api.ExecRequest, out sink, stdin <-chan []byte) (adapters.ExitStatus, error) {
	return a.runOn(ctx, ref, req, out, stdin, nil)
}

// runOn is run on a terminal when term is not nil (ExecPTY).
func (a *Adapter) runOn(ctx context.Context, ref string, req api.ExecRequest, out sink, stdin <-chan []byte, term *terminal) (adapters.ExitStatus, error) {
	if err := req.Validate(); err != nil {
		return adapters.ExitStatus{}, err
	}
	timeout := DefaultExecTimeout
	if req.TimeoutSeconds > 0 {
		timeout = time.Duration(req.TimeoutSeconds) * time.Second
	}
	if !validID(ref) {
		return adapters.ExitStatus{}, adapters.NotFound("devhost: instance %q not found", ref)
	}
	if err := ctx.Err(); err != nil {
		return adapters.ExitStatus{}, contextError(err)
	}

	// The instance lock is held from the state check until the process is registered,
	// so a Stop or Delete either sees this exec (and kills it) or runs first (and the
	// exec is refused): no command slips past a stop.
	unlock := a.locks.lock("sbx:" + ref)
	s, early, err := a.start(ref, req, stdin != nil, term)
	unlock()
	if err != nil {
		return adapters.ExitStatus{}, err
	}
	if early != nil {
		// The program could not be started; report it the way a shell would.
		if err := out(api.StreamStderr, []byte(early.msg)); err != nil {
			return adapters.ExitStatus{}, err
		}
		return adapters.ExitStatus{Code: early.code}, nil
	}
	defer a.procs.remove(ref, s.proc)
	s.stdinCh = stdin
	if term != nil {
		s.resize = term.resize
	}
	return s.wait(ctx, timeout, out)
}

// startFailure is a program that could not be executed: 127 not found, 126 not
// executable, as sh reports them.
type startFailure struct {
	code int
	msg  string
}

// session is one started command and the parent's ends of its pipes.
type session struct {
	cmd            *exec.Cmd
	proc           *proc
	stdout, stderr *os.File
	stdin          *os.File // nil when the request has no stdin
	stdinData      string
	stdinCh        <-chan []byte // ExecStdin's; nil otherwise
	// pty is the terminal's master when the command runs on one: it is stdout and
	// stdin both, and stderr is nil. resize brings new sizes for it.
	pty    *os.File
	resize <-chan adapters.TermSize
	exited func() // the jail's, called after Wait; nil without one
}

// start starts req's command; feed asks for a stdin pipe though req.Stdin is empty;
// term, when not nil, runs it on a new terminal instead of pipes.
func (a *Adapter) start(ref string, req api.ExecRequest, feed bool, term *terminal) (*session, *startFailure, error) {
	m, err := a.loadMeta(ref)
	if err != nil {
		return nil, nil, err
	}
	if m.State != adapters.StateRunning {
		return nil, nil, adapters.InvalidState("devhost: instance %q is %s", ref, m.State)
	}
	fsDir := a.fsDir(ref)
	dir, err := resolveCwd(fsDir, req.Cwd)
	if err != nil {
		return nil, nil, err
	}
	execID := randomSuffix()
	var env map[string]string
	if a.jail != nil {
		env = layerEnv(a.jail.BaseEnv(fsDir), m.Env, req.Env)
	} else {
		env = buildEnv(fsDir, m.Env, req.Env)
		// Set last, so the sandbox's env cannot replace it.
		env[markerVar] = a.track.marker(ref, execID)
	}

	path, args := "/bin/sh", []string{"/bin/sh", "-c", req.Command}
	if len(req.Args) > 0 {
		args = req.Args
		path = lookPath(req.Args[0], env["PATH"], dir)
		if path == "" {
			return nil, &startFailure{127, req.Args[0] + ": command not found\n"}, nil
		}
	}

	var files []*os.File // every end, closed if anything below fails
	closeAll := func() {
		for _, f := range files {
			_ = f.Close()
		}
	}
	pipe := func() (r, w *os.File, err error) {
		r, w, err = os.Pipe()
		if err == nil {
			files = append(files, r, w)
		}
		return r, w, err
	}
	s := &session{stdinData: req.Stdin}
	var outW, errW, inR *os.File
	if term != nil {
		var tty *os.File
		if s.pty, tty, err = openPTY(); err != nil {
			return nil, nil, internalError("open a terminal: %v", err)
		}
		files = append(files, s.pty, tty)
		if err := setWinsize(s.pty, term.size); err != nil {
			closeAll()
			return nil, nil, internalError("size the terminal: %v", err)
		}
		s.stdout, s.stdin = s.pty, s.pty
		outW, errW, inR = tty, tty, tty
	} else {
		if s.stdout, outW, err = pipe(); err == nil {
			if s.stderr, errW, err = pipe(); err == nil && (req.Stdin != "" || feed) {
				inR, s.stdin, err = pipe()
			}
		}
		if err != nil {
			closeAll()
			return nil, nil, internalError("create pipes: %v", err)
		}
		growPipe(s.stdout)
		growPipe(s.stderr)
	}
	onTerminal := func(cmd *exec.Cmd) *exec.Cmd {
		if term != nil {
			// The terminal becomes the command's controlling terminal in a
			// session of its own, whose ID is also its process group's: the
			// group kill of Stop and Delete still reaches everything.
			cmd.SysProcAttr.Setpgid = false
			cmd.SysProcAttr.Setsid, cmd.SysProcAttr.Setctty, cmd.SysProcAttr.Ctty = true, true, 0
		}
		return cmd
	}

	if a.jail != nil {
		s.cmd = onTerminal(command(path, args, dir, env, outW, errW, inR, nil))
		started, exited, err := a.jail.Wrap(JailSandbox{ID: ref, Dir: fsDir, Resources: m.Resources}, s.cmd)
		if err == nil {
			err = s.cmd.Start()
			if serr := started(err); err == nil && serr != nil {
				err = serr
				_ = s.cmd.Process.Kill()
				_ = s.cmd.Wait()
			}
			if err == nil {
				s.exited = exited
			} else if exited != nil && s.cmd.Process != nil {
				exited()
			}
		}
		if err != nil {
			closeAll()
			return nil, nil, internalError("start command: %v", err)
		}
		return s.started(a, ref, execID, fsDir, nil, outW, errW, inR), nil, nil
	}
	group := a.track.newExecGroup(ref, execID)
	s.cmd = onTerminal(command(path, args, dir, env, outW, errW, inR, group))
	err = s.cmd.Start()
	if err != nil && group != nil {
		// The kernel may lack CLONE_INTO_CGROUP (before 5.7); the marker remains.
		group.started()
		group.remove()
		group = nil
		s.cmd = onTerminal(command(path, args, dir, env, outW, errW, inR, nil))
		err = s.cmd.Start()
	}
	group.started()
	if err != nil {
		closeAll()
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return nil, &startFailure{127, args[0] + ": not found\n"}, nil
		case errors.Is(err, fs.ErrPermission), errors.Is(err, syscall.ENOEXEC):
			return nil, &startFailure{126, args[0] + ": cannot execute: " + unwrapMsg(err) + "\n"}, nil
		}
		return nil, nil, internalError("start command: %v", err)
	}
	return s.started(a, ref, execID, fsDir, group, outW, errW, inR), nil, nil
}

// started registers the started command with the adapter.
func (s *session) started(a *Adapter, ref, execID, fsDir string, group *execGroup, outW, errW, inR *os.File) *session {
	// The child holds its own copies; ours would keep the pipes open forever.
	for _, f := range []*os.File{outW, errW, inR} {
		if f != nil {
			_ = f.Close()
		}
	}
	s.proc = &proc{pgid: s.cmd.Process.Pid, leader: s.cmd.Process, id: ref, execID: execID, fsDir: fsDir, group: group}
	if a.jail == nil {
		s.proc.track = a.track
	}
	a.procs.add(ref, s.proc)
	return s
}

// command builds the exec.Cmd of one command, started in group's cgroup when
// group is not nil.
func command(path string, args []string, dir string, env map[string]string, outW, errW, inR *os.File, group *execGroup) *exec.Cmd {
	cmd := &exec.Cmd{
		Path:   path,
		Args:   args,
		Dir:    dir,
		Env:    envList(env),
		Stdout: outW,
		Stderr: errW,
		// Its own process group, so a timeout, Stop or Delete can kill everything
		// the command spawned with one signal.
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true},
	}
	if inR != nil {
		cmd.Stdin = inR // never a typed nil: that would not mean /dev/null
	}
	setCgroup(cmd.SysProcAttr, group)
	return cmd
}

// chunk is a piece of one stream's output, or the end of it (eof). Its data lies in
// a buffer of the reader's, which release hands back once the data has been used.
type chunk struct {
	stream string
	data   []byte
	eof    bool
	free   chan<- []byte // where the buffer goes back; nil when it need not
}

func (c chunk) release() {
	if c.free != nil {
		c.free <- c.data[:0]
	}
}

// wait feeds stdin, collects output and waits for the command, enforcing the
// timeout and ctx. Every goroutine it starts has ended when it returns.
func (s *session) wait(ctx context.Context, timeout time.Duration, out sink) (adapters.ExitStatus, error) {
	var wg sync.WaitGroup
	chunks := make(chan chunk)
	streams := []struct {
		f    *os.File
		name string
	}{{s.stdout, api.StreamStdout}}
	if s.stderr != nil { // nil on a terminal, whose output is one stream
		streams = append(streams, struct {
			f    *os.File
			name string
		}{s.stderr, api.StreamStderr})
	}
	for _, p := range streams {
		wg.Go(func() { readPipe(p.f, p.name, chunks) })
	}
	var closeStdin sync.Once
	// ended is closed once the command has exited: a feeder stops receiving then.
	ended := make(chan struct{})
	var endOnce sync.Once
	end := func() { endOnce.Do(func() { close(ended) }) }
	switch {
	case s.stdinCh != nil:
		wg.Go(func() { s.feed(ended, &closeStdin) })
	case s.stdin != nil:
		wg.Go(func() {
			// EPIPE when the command does not read it all is fine.
			_, _ = s.stdin.WriteString(s.stdinData)
			closeStdin.Do(func() { _ = s.stdin.Close() })
		})
	}
	exited := make(chan error, 1)
	wg.Go(func() {
		err := s.cmd.Wait()
		if s.exited != nil {
			s.exited()
		}
		exited <- err
	})

	timer := time.NewTimer(timeout)
	defer timer.Stop()
	var (
		graceC   <-chan time.Time
		done     = ctx.Done()
		open     = len(streams)
		hasExit  bool
		waitErr  error
		timedOut bool
		failErr  error // from out or ctx; stops further output
	)
	resize := s.resize // nil but on a terminal; this loop, which owns the terminal, applies each size
	for !hasExit || open > 0 {
		select {
		case sz, ok := <-resize:
			if !ok {
				resize = nil
			} else if sz.Cols > 0 && sz.Rows > 0 {
				_ = setWinsize(s.pty, sz)
			}
		case c := <-chunks:
			if c.eof {
				open--
			} else if failErr == nil {
				if err := out(c.stream, c.data); err != nil {
					failErr = err
					s.proc.kill(nil)
				}
			}
			c.release()
		case waitErr = <-exited:
			hasExit = true
			end()
			// Background leftovers die with their command; see Info.Description.
			s.proc.exited()
			if open > 0 {
				grace := time.NewTimer(pipeGrace)
				defer grace.Stop()
				graceC = grace.C
			}
		case <-graceC:
			graceC = nil
			_ = s.stdout.Close() // wakes the readers with an error, ending them
			if s.stderr != nil {
				_ = s.stderr.Close()
			}
		case <-timer.C:
			if !hasExit {
				timedOut = true
				s.proc.kill(nil)
			}
		case <-done:
			done = nil
			if failErr == nil {
				failErr = contextError(ctx.Err())
			}
			s.proc.kill(nil)
		}
	}
	_ = s.stdout.Close()
	if s.stderr != nil {
		_ = s.stderr.Close()
	}
	end()
	if s.stdin != nil {
		// Wakes a writer still blocked because a reader escaped the group.
		closeStdin.Do(func() { _ = s.stdin.Close() })
	}
	wg.Wait()

	switch {
	case failErr != nil:
		return adapters.ExitStatus{}, failErr
	case s.proc.reason() != nil:
		return adapters.ExitStatus{}, s.proc.reason()
	case timedOut:
		return adapters.ExitStatus{Code: api.TimeoutExitCode, TimedOut: true}, nil
	}
	ps := s.cmd.ProcessState
	if ps == nil {
		return adapters.ExitStatus{}, internalError("wait for command: %v", waitErr)
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return adapters.ExitStatus{Code: 128 + int(ws.Signal())}, nil
	}
	return adapters.ExitStatus{Code: ps.ExitCode()}, nil
}

// feed writes what arrives on s.stdinCh to the command's stdin until the channel
// closes (then the command's stdin closes: end of file) or the command has ended.
// Once a write fails (the command closed its stdin), what still arrives is
// received and dropped, so that the sender is never held up by a reader that is gone.
func (s *session) feed(ended <-chan struct{}, closeStdin *sync.Once) {
	// A terminal's input has no end of file to give: its master is also the
	// output, which must stay open. (A Ctrl-D is the terminal's end of file.)
	if s.pty == nil {
		defer closeStdin.Do(func() { _ = s.stdin.Close() })
	}
	broken := false
	for {
		select {
		case b, ok := <-s.stdinCh:
			if !ok {
				return
			}
			if !broken {
				if _, err := s.stdin.Write(b); err != nil {
					broken = true
				}
			}
		case <-ended:
			return
		}
	}
}

// readPipe sends r's content to ch in chunks, then an eof marker. A multi-byte
// UTF-8 character split by a read is held back until it is whole, so that streamed
// events, which travel as JSON strings, do not mangle it.
//
// It reads into two buffers in turn: one is filled while the other's chunk is
// forwarded, and a buffer is reused once the chunk in it has been released, so a
// long stream allocates nothing here.
func readPipe(r *os.File, stream string, ch chan<- chunk) {
	free := make(chan []byte, 2) // never blocks: only two buffers go round
	free <- nil
	free <- nil
	size := minRead
	var pending [utf8.UTFMax]byte // the start of a split character
	np := 0
	for {
		buf := <-free
		if cap(buf) < size {
			buf = make([]byte, size)
		}
		buf = buf[:cap(buf)]
		copy(buf, pending[:np])
		n, err := r.Read(buf[np:])
		if n > 0 {
			if np+n == len(buf) {
				size = min(2*len(buf), maxRead)
			}
			whole, rest := splitUTF8(buf[:np+n])
			np = copy(pending[:], rest)
			if len(whole) > 0 {
				ch <- chunk{stream: stream, data: whole, free: free}
				buf = nil
			}
		}
		if buf != nil {
			free <- buf
		}
		if err != nil {
			break
		}
	}
	if np > 0 {
		ch <- chunk{stream: stream, data: pending[:np]}
	}
	ch <- chunk{stream: stream, eof: true}
}

// splitUTF8 splits b before a trailing incomplete UTF-8 sequence, if there is one.
// Bytes that are simply invalid are passed on; only a valid-looking prefix waits.
func splitUTF8(b []byte) (whole, rest []byte) {
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				return b[:i], b[i:]
			}
			break
		}
	}
	return b, nil
}

// buildEnv is the command's whole environment. It deliberately starts from almost
// nothing: the daemon's environment may hold credentials.
func buildEnv(home string, base, overlay map[string]string) map[string]string {
	path := os.Getenv("PATH")
	if path == "" {
		path = fallbackPATH
	}
	env := map[string]string{"PATH": path, "HOME": home}
	maps.Copy(env, base)
	maps.Copy(env, overlay)
	return env
}

// layerEnv is base with each overlay laid over it in turn, in a new map.
func layerEnv(base map[string]string, overlays ...map[string]string) map[string]string {
	env := maps.Clone(base)
	if env == nil {
		env = map[string]string{}
	}
	for _, o := range overlays {
		maps.Copy(env, o)
	}
	return env
}

func envList(env map[string]string) []string {
	out := make([]string, 0, len(env))
	for _, k := range slices.Sorted(maps.Keys(env)) {
		out = append(out, k+"="+env[k])
	}
	return out
}

// lookPath resolves a program like exec.LookPath, but against the sandbox's PATH
// rather than the daemon's. Relative PATH entries are skipped, as LookPath refuses
// them (ErrDot). A name with a slash is used as is, relative to the working dir.
// It returns "" when nothing matches.
func lookPath(file, pathEnv, dir string) string {
	if strings.Contains(file, "/") {
		if filepath.IsAbs(file) {
			return file
		}
		return filepath.Join(dir, file)
	}
	for _, d := range filepath.SplitList(pathEnv) {
		if !filepath.IsAbs(d) {
			continue
		}
		p := filepath.Join(d, file)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return p
		}
	}
	return ""
}

// resolveCwd maps a request's cwd to a host directory inside the sandbox, with the
// same rules as file paths. The check and the later chdir are not atomic; that is
// acceptable because the command itself is not confined anyway.
func resolveCwd(fsDir, cwd string) (string, error) {
	rel, err := cleanPath(fsDir, cwd, true)
	if err != nil {
		return "", err
	}
	r, err := os.OpenRoot(fsDir)
	if err != nil {
		// The instance record exists but its tree does not: this sandbox is broken.
		return "", adapters.SandboxFailed("devhost: open sandbox directory: %v", err)
	}
	defer r.Close()
	fi, err := r.Stat(rel)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return "", adapters.InvalidRequest("devhost: cwd %q does not exist", cwd)
		}
		return "", fsError("cwd", cwd, err)
	}
	if !fi.IsDir() {
		return "", adapters.InvalidRequest("devhost: cwd %q is not a directory", cwd)
	}
	return filepath.Join(fsDir, rel), nil
}

func unwrapMsg(err error) string {
	for {
		u := errors.Unwrap(err)
		if u == nil {
			return err.Error()
		}
		err = u
	}
}
