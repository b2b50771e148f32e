package adapters

import (
	"context"
	"io"

	"github.com/different-ai/differently/api"
)

// ProtocolVersion is the contract and HTTP protocol version. A breaking change bumps it.
const ProtocolVersion = "1"

// ExecutionAdapter is the interface every adapter implements. All methods are safe for
// concurrent use. Methods that take a ref answer not_found when the instance does not
// exist, except Delete.
type ExecutionAdapter interface {
	// Info describes the adapter: kind, version, trust claim, isolation, protocol.
	// It does no I/O. The operator's pool trust setting is authoritative over Trust.
	Info() Info

	// Capabilities returns the declared features and limits. The pool manager passes
	// the features through EffectiveFeatures before anyone relies on them.
	Capabilities(ctx context.Context) (Capabilities, error)

	// Capacity returns free capacity now. Adapters without a meaningful limit return
	// Bounded false; the pool's maxConcurrency then governs.
	Capacity(ctx context.Context) (Capacity, error)

	// Health returns nil when the backend can accept work. An error (normally
	// provider_unavailable) marks the pool unhealthy until the next good probe.
	Health(ctx context.Context) error

	// Create makes the instance for req.ID, or returns the existing one: it is
	// idempotent on req.ID, including after a lost response, a crash of the caller, or
	// two concurrent calls. It should return once the instance is ready for Exec, and
	// honour Template, Resources, Env, TTLSeconds, FromSnapshot (a snapshot ref from this
	// same adapter; a missing one is invalid_request) and Labels, stamping
	// OwnershipLabels where the backend can store them.
	//
	// Errors: insufficient_capacity when there is no room right now, sandbox_failed
	// when the backend is up but this instance failed, invalid_request when it can
	// never start, provider_unavailable for outages.
	Create(ctx context.Context, req CreateRequest) (Instance, error)

	// Get returns the instance for ref, or not_found.
	Get(ctx context.Context, ref string) (Instance, error)

	// List returns every instance created with this installation, in any state but
	// deleted, each with its SandboxID. It must fail rather than return a partial list.
	List(ctx context.Context, installation string) ([]Instance, error)

	// Delete removes the instance and everything it holds. It is idempotent: deleting a
	// missing instance succeeds.
	Delete(ctx context.Context, ref string) error

	// Exec runs a command to completion: /bin/sh -c Command, or Args without a shell,
	// with Env over the instance's env, Cwd, Stdin and TimeoutSeconds. A non-zero exit
	// is a result, not an error; so is a timeout (TimedOut, exit code 124). Output
	// beyond api.MaxExecOutputBytes per stream is cut and Truncated set. Exec on an
	// instance that is not running is invalid_state.
	Exec(ctx context.Context, ref string, req api.ExecRequest) (api.ExecResult, error)
}

// Streamer backs the exec.stream feature.
type Streamer interface {
	// ExecStream runs a command like Exec and calls emit with output events (Stream
	// and Data only) as they are produced, in order, from one goroutine at a time. It
	// returns how the command exited; a timeout is an exit, not an error. When emit
	// returns an error the command is killed and ExecStream returns that error. The
	// final event is the caller's to send.
	ExecStream(ctx context.Context, ref string, req api.ExecRequest, emit func(api.ExecEvent) error) (ExitStatus, error)
}

// ByteStreamer is an optional fast path of Streamer for callers that pass output on
// rather than keep it, such as the NDJSON writers of the API and of the adapter
// protocol: emit gets each piece of output as bytes that are only valid during the
// call (emit must neither keep nor change them), so the adapter need not copy them
// into a string first. It otherwise behaves exactly like ExecStream, and is used
// only where exec.stream is an effective feature.
type ByteStreamer interface {
	Streamer
	ExecStreamBytes(ctx context.Context, ref string, req api.ExecRequest, emit func(stream string, data []byte) error) (ExitStatus, error)
}

// StdinStreamer backs exec.stdin: a streamed command whose stdin is fed while it
// runs, for programs that talk with their caller (a REPL, a prompt, a protocol on
// stdin and stdout), not one string given up front.
type StdinStreamer interface {
	// ExecStdin runs a command like ExecStreamBytes (req.Stdin must be empty) and
	// writes each piece received from stdin to the command's stdin, in order; when
	// stdin is closed, the command's stdin is closed (end of file). A command that
	// ends with stdin still open ends the exec: ExecStdin then stops receiving and
	// returns without waiting for stdin to close. The caller never blocks for long
	// in a send: the adapter receives while the command runs, as fast as the
	// command reads (a command that does not read holds its sender up, as a full
	// pipe does).
	ExecStdin(ctx context.Context, ref string, req api.ExecRequest, stdin <-chan []byte, emit func(stream string, data []byte) error) (ExitStatus, error)
}

// PTYExec backs pty: a command on a terminal of its own, as a person at a shell
// has (E2B's sbx.pty). Its output is the terminal's, stdout and stderr as one.
type PTYExec interface {
	// ExecPTY runs a command (req.Stdin must be empty) on a new terminal of size,
	// writes what arrives on input to the terminal as typed keys (a Ctrl-D, 0x04,
	// is end of file to a program reading lines), resizes the terminal on each
	// size from resize, and emits its output with stream stdout. Neither channel
	// closing ends the command; the command ending ends the exec, as for
	// ExecStdin. The timeout, ctx and emit's errors behave as for ExecStream.
	ExecPTY(ctx context.Context, ref string, req api.ExecRequest, size TermSize, input <-chan []byte, resize <-chan TermSize,
		emit func(stream string, data []byte) error) (ExitStatus, error)
}

// TermSize is a terminal's size in characters.
type TermSize struct{ Cols, Rows uint16 }

// ExitStatus is how a streamed command ended.
type ExitStatus struct {
	Code int
	// TimedOut is set when the command was killed by its timeout (Code is then 124).
	TimedOut bool
}

// FileSystem backs the files feature. Paths are inside the sandbox; adapters reject
// paths that would reach outside it with invalid_request.
type FileSystem interface {
	// ReadFile returns a file's content. A file over api.MaxFileBytes is
	// payload_too_large, never silently cut; a missing file is not_found.
	ReadFile(ctx context.Context, ref, path string) ([]byte, error)
	// WriteFile creates or replaces a file, creating missing parent directories.
	WriteFile(ctx context.Context, ref, path string, data []byte) error
	// ListFiles lists a directory's entries (not recursively).
	ListFiles(ctx context.Context, ref, path string) ([]FileInfo, error)
}

// FileStreamer is an optional fast path of FileSystem for callers that pass file
// content on rather than keep it, such as the API's upload and download handlers: the
// content flows through in pieces, so a 100 MiB file does not take 100 MiB of the
// caller's memory. It otherwise behaves exactly like ReadFile and WriteFile, and is
// used only where files is an effective feature.
type FileStreamer interface {
	FileSystem
	// WriteFileFrom creates or replaces a file with what content yields until io.EOF.
	// More than api.MaxFileBytes is payload_too_large. When reading content fails,
	// WriteFileFrom returns an error that wraps the reader's, and the file is left as
	// it was: a failed upload never leaves a partial file behind where the backend can
	// avoid it.
	WriteFileFrom(ctx context.Context, ref, path string, content io.Reader) error
	// OpenFile opens a file for reading, with its size (-1 when the backend cannot
	// tell before reading). The errors are ReadFile's; a file known to be over
	// api.MaxFileBytes is refused here, and one that grows past it while being read
	// makes the reader fail rather than end early. The caller closes the reader.
	OpenFile(ctx context.Context, ref, path string) (io.ReadCloser, int64, error)
}

// Lifecycle backs lifecycle.stop-start and persistence.disk. Both calls are idempotent:
// stopping a stopped instance or starting a running one succeeds.
type Lifecycle interface {
	// Stop halts the instance, keeping its disk.
	Stop(ctx context.Context, ref string) error
	// Start runs a stopped instance again.
	Start(ctx context.Context, ref string) error
}

// Pauser backs lifecycle.pause-resume. Both calls are idempotent.
type Pauser interface {
	// Pause freezes the instance with its memory kept.
	Pause(ctx context.Context, ref string) error
	// Resume unfreezes a paused instance.
	Resume(ctx context.Context, ref string) error
}

// Snapshotter backs snapshots.disk, snapshots.memory and fork. Restoring happens
// through CreateRequest.FromSnapshot on the same adapter.
type Snapshotter interface {
	// Snapshot captures the instance. Kind is SnapshotDisk or SnapshotMemory; an
	// adapter that cannot take the kind asked for answers unsupported_operation.
	Snapshot(ctx context.Context, ref string, kind SnapshotKind) (Snapshot, error)
	// DeleteSnapshot removes a snapshot; deleting a missing one succeeds.
	DeleteSnapshot(ctx context.Context, snapshotRef string) error
}

// PortExposer backs ports.expose.
type PortExposer interface {
	// ExposePort returns a URL that reaches the guest port.
	ExposePort(ctx context.Context, ref string, port int) (url string, err error)
}

// TTLRenewer is implemented by adapters whose backend keeps its own expiry for an
// instance (a TTL backstop set at Create). When a sandbox's TTL changes, the control
// plane calls RenewTTL so that the backend does not delete the instance early. It
// backs no feature name: the control plane calls it whenever it is there.
type TTLRenewer interface {
	// RenewTTL moves the backend's expiry to ttlSeconds from now; 0 removes it where
	// the backend allows, else sets the longest expiry it accepts.
	RenewTTL(ctx context.Context, ref string, ttlSeconds int64) error
}
