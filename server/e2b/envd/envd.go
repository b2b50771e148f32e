// Package envd speaks the protocol of E2B's in-sandbox daemon, envd, for the sandboxes
// of this control plane, so that E2B's SDKs run commands and move files in them
// unmodified: the Connect services process.Process and filesystem.Filesystem (proto/,
// generated into gen/) and the REST endpoints /health and /files.
//
// The SDK reaches every sandbox through one base URL (E2B_SANDBOX_URL) and names the
// sandbox in the E2b-Sandbox-Id header, with the sandbox's envd access token in
// X-Access-Token; a Verifier turns the two into the Caller the service checks.
//
// Paths. The SDK resolves nothing itself: a relative path is the user's home. With
// Options.Home set, relative paths are joined to it; left empty, to the sandbox's
// $HOME, asked of the sandbox once through the exec path and remembered (for
// devhost, the sandbox's tree, whose file API takes absolute paths inside it). A
// sandbox without an absolute $HOME gets relative paths through to its adapter
// unchanged. Absolute paths always go through unchanged.
//
// What the adapter contract lacks is done by a shell in the sandbox, through the same
// exec path as commands: MakeDir (mkdir -p), Move (mkdir -p and mv) and Remove
// (rm -rf). Those need a POSIX sh in the sandbox's image. Stat and a deep ListDir are
// built from the contract's one-level directory listing.
//
// Processes. Pids are the front door's own, per handler. A process runs on the
// handler's context, not its stream's: like envd's, it goes on when the client leaves
// (a background command) and is reattached with Connect. It ends by itself, by
// SendSignal (SIGTERM is a kill as well: the exec contract stops a command only by
// cancelling it), by the stream's Connect-Timeout-Ms, at the exec contract's longest
// timeout (api.MaxExecTimeoutSeconds), or by Handler.Close.
//
// Directory watches (WatchDir, and CreateWatcher with GetWatcherEvents and
// RemoveWatcher) poll the directory through the same listing, every
// Options.WatchInterval, and tell the differences as envd's events; watch.go says
// what polling can and cannot see. They are bounded per sandbox and per handler, and
// end with their stream, by RemoveWatcher, unread for watcherIdle, or by Close.
//
// A process's stdin (SendInput, StreamInput, CloseStdin) is fed while it runs on
// pools with exec.stdin; elsewhere a start that asks for stdin is refused, naming
// the pool, and one that does not ask runs with stdin at end of file.
//
// A process started with a pty runs on a terminal where the pool has one (pty):
// its output comes as pty data, SendInput and StreamInput type on it, Update
// resizes it; elsewhere such a start is refused, naming the pool. The username
// query parameter and X-Metadata-* upload headers are ignored.
package envd

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"path"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/internal/clock"
	"github.com/different-ai/differently/server/e2b/envd/gen/filesystempb/filesystempbconnect"
	"github.com/different-ai/differently/server/e2b/envd/gen/processpb/processpbconnect"
	"github.com/different-ai/differently/server/sandboxes"
	"github.com/different-ai/differently/server/store"
)

// Service is what the front door needs of sandboxes.Service.
type Service interface {
	Sandbox(ctx context.Context, c sandboxes.Caller, id string) (store.Sandbox, error)
	Command(ctx context.Context, c sandboxes.Caller, id string, req api.ExecRequest) (*sandboxes.Command, error)
	ListFiles(ctx context.Context, c sandboxes.Caller, id, path string) ([]adapters.FileInfo, error)
	ReadFile(ctx context.Context, c sandboxes.Caller, id, path string) (*sandboxes.File, error)
	WriteFile(ctx context.Context, c sandboxes.Caller, id, path string, content sandboxes.Content) error
}

// Verifier checks a sandbox's envd access token (X-Access-Token) and says who calls
// with it. An error that is an *api.Error keeps its code; any other is answered as
// unauthenticated.
type Verifier interface {
	Verify(ctx context.Context, sandboxID, token string) (sandboxes.Caller, error)
}

// Headers the SDK sends with every envd request.
const (
	headerSandboxID   = "E2b-Sandbox-Id"
	headerAccessToken = "X-Access-Token"
)

// Options are the handler's settings; the zero value is usable.
type Options struct {
	// Home is the directory relative paths are resolved against; empty leaves them
	// relative, to the adapter (see the package comment).
	Home string
	// MaxProcesses bounds the processes started through the front door and still
	// running, per sandbox; 0 means DefaultMaxProcesses.
	MaxProcesses int
	// WatchInterval is how often a directory watch polls its directory; 0 means
	// DefaultWatchInterval.
	WatchInterval time.Duration
	// MaxWatchers bounds the directory watches (streaming or not) of one sandbox;
	// 0 means DefaultMaxWatchers.
	MaxWatchers int
	// MaxWatchersTotal bounds the directory watches of all sandboxes together; 0
	// means DefaultMaxWatchersTotal.
	MaxWatchersTotal int
	// Clock tells when a watcher was last read; nil is the system clock.
	Clock clock.Clock
	Log   *slog.Logger
}

// DefaultMaxProcesses is Options.MaxProcesses' default.
const DefaultMaxProcesses = 64

// Handler serves envd's protocol for every sandbox. It owns the processes and the
// directory watches started through it: Close ends them and waits for them.
type Handler struct {
	svc     Service
	v       Verifier
	opts    Options
	log     *slog.Logger
	mux     *http.ServeMux
	clock   clock.Clock
	procs   *registry
	watches *watchRegistry
	// newTicker makes the keepalive tickers of streams, newPollTicker those of
	// directory watches; tests replace them.
	newTicker     func(time.Duration) (<-chan time.Time, func())
	newPollTicker func(time.Duration) (<-chan time.Time, func())

	homesMu sync.Mutex
	homes   map[string]string // sandbox ID → $HOME; see homeOf
}

// NewHandler serves envd's protocol with svc's sandboxes, v checking the callers. It
// answers paths as envd has them (/health, /files, /process.Process/Start, ...): a
// handler mounted under a prefix is given the requests with the prefix stripped.
func NewHandler(svc Service, v Verifier, opts Options) *Handler {
	if opts.MaxProcesses <= 0 {
		opts.MaxProcesses = DefaultMaxProcesses
	}
	if opts.WatchInterval <= 0 {
		opts.WatchInterval = DefaultWatchInterval
	}
	if opts.MaxWatchers <= 0 {
		opts.MaxWatchers = DefaultMaxWatchers
	}
	if opts.MaxWatchersTotal <= 0 {
		opts.MaxWatchersTotal = DefaultMaxWatchersTotal
	}
	if opts.Clock == nil {
		opts.Clock = clock.Real{}
	}
	log := opts.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	h := &Handler{svc: svc, v: v, opts: opts, log: log, clock: opts.Clock, mux: http.NewServeMux(), procs: newRegistry(),
		watches: newWatchRegistry(), newTicker: realTicker, newPollTicker: realTicker, homes: map[string]string{}}
	// The SDK speaks Connect's JSON; the binary codec stays on, as generated.
	h.mux.Handle(processpbconnect.NewProcessHandler(&processService{h: h}))
	h.mux.Handle(filesystempbconnect.NewFilesystemHandler(&filesystemService{h: h}))
	h.mux.HandleFunc("GET /health", h.health)
	h.mux.HandleFunc("GET /files", h.readFile)
	h.mux.HandleFunc("POST /files", h.writeFiles)
	return h
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.mux.ServeHTTP(w, r) }

// Close kills every process started through the handler, ends its directory
// watches, and waits until they have ended. Requests served after Close cannot
// start either.
func (h *Handler) Close() error {
	h.procs.close()
	h.watches.close()
	return nil
}

// caller authenticates a request: the sandbox it names and who calls.
func (h *Handler) caller(ctx context.Context, hdr http.Header) (sandboxes.Caller, string, error) {
	id := hdr.Get(headerSandboxID)
	if id == "" {
		return sandboxes.Caller{}, "", api.Errorf(api.CodeInvalidRequest, "the %s header is required", headerSandboxID)
	}
	token := hdr.Get(headerAccessToken)
	if token == "" {
		return sandboxes.Caller{}, "", api.Errorf(api.CodeUnauthenticated, "the %s header is required", headerAccessToken)
	}
	c, err := h.v.Verify(ctx, id, token)
	if err != nil {
		if api.AsError(err) == nil {
			err = api.Errorf(api.CodeUnauthenticated, "%s", err.Error())
		}
		return sandboxes.Caller{}, "", err
	}
	return c, id, nil
}

// resolve maps a path of the SDK's to the adapter's (see the package comment): a
// relative one is joined to Options.Home or, without one, to the sandbox's $HOME.
// Errors are the service's, for the caller to answer in its protocol.
func (h *Handler) resolve(ctx context.Context, c sandboxes.Caller, id, p string) (string, error) {
	if p == "" || strings.HasPrefix(p, "/") {
		return p, nil
	}
	home := h.opts.Home
	if home == "" {
		var err error
		if home, err = h.homeOf(ctx, c, id); err != nil {
			return "", err
		}
	}
	if home == "" {
		return p, nil
	}
	return path.Join(home, p), nil
}

// maxHomes bounds the cache of the sandboxes' home directories; when it is full it
// starts over, which costs one exec per sandbox in use.
const maxHomes = 4096

// homeOf is the sandbox's $HOME, asked of the sandbox once (through the exec path)
// and remembered: E2B resolves relative paths against the user's home, which only
// the sandbox knows. "" when the sandbox has no absolute $HOME; relative paths then
// go to the adapter unchanged.
func (h *Handler) homeOf(ctx context.Context, c sandboxes.Caller, id string) (string, error) {
	h.homesMu.Lock()
	home, ok := h.homes[id]
	h.homesMu.Unlock()
	if ok {
		return home, nil
	}
	cmd, err := h.svc.Command(ctx, c, id, api.ExecRequest{Args: []string{"sh", "-c", `printf %s "$HOME"`},
		TimeoutSeconds: shellTimeoutSeconds})
	if err != nil {
		return "", err
	}
	res, err := cmd.Run(ctx)
	if err != nil {
		return "", err
	}
	if res.ExitCode == 0 && strings.HasPrefix(res.Stdout, "/") && !strings.ContainsAny(res.Stdout, "\n\x00") {
		home = path.Clean(res.Stdout)
	}
	h.homesMu.Lock()
	if len(h.homes) >= maxHomes {
		clear(h.homes)
	}
	h.homes[id] = home
	h.homesMu.Unlock()
	return home, nil
}

// connectError turns the service's errors into Connect's.
func connectError(err error) error {
	if err == nil {
		return nil
	}
	var ce *connect.Error
	if errors.As(err, &ce) {
		return ce
	}
	if errors.Is(err, context.Canceled) {
		return connect.NewError(connect.CodeCanceled, err)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return connect.NewError(connect.CodeDeadlineExceeded, err)
	}
	if errors.Is(err, sandboxes.ErrTransferLimit) {
		return connect.NewError(connect.CodeResourceExhausted, err)
	}
	e := api.AsError(err)
	if e == nil {
		return connect.NewError(connect.CodeInternal, err)
	}
	msg := errors.New(api.Message(err))
	switch e.Code {
	case api.CodeInvalidRequest:
		return connect.NewError(connect.CodeInvalidArgument, msg)
	case api.CodeUnauthenticated:
		return connect.NewError(connect.CodeUnauthenticated, msg)
	case api.CodeForbidden:
		return connect.NewError(connect.CodePermissionDenied, msg)
	case api.CodeNotFound:
		return connect.NewError(connect.CodeNotFound, msg)
	case api.CodeInvalidState:
		return connect.NewError(connect.CodeFailedPrecondition, msg)
	case api.CodePayloadTooLarge, api.CodeQuotaExceeded, api.CodeInsufficientCapacity:
		return connect.NewError(connect.CodeResourceExhausted, msg)
	case api.CodeUnsupportedCapability, api.CodeUnsupportedOperation:
		return connect.NewError(connect.CodeUnimplemented, msg)
	case api.CodeProviderUnavailable, api.CodeSandboxFailed:
		return connect.NewError(connect.CodeUnavailable, msg)
	}
	return connect.NewError(connect.CodeInternal, msg)
}
