// Package fake is an in-memory execution adapter for tests, development and fault
// injection. It implements ExecutionAdapter and every optional interface (Streamer,
// FileSystem, Lifecycle, Pauser, Snapshotter, PortExposer, TTLRenewer), keeps all state in memory
// and never touches the host: exec echoes the command back unless a test installs
// Config.ExecFunc.
//
// Instances get refs "fake_<ulid>" and snapshots "snap_<ulid>". Create is idempotent
// on the sandbox ID, also across concurrent calls and after a simulated lost
// response. Instances remember their installation, template, resources, env and
// labels (with the ownership labels stamped on); Inspect returns them.
//
// # Pool configuration
//
// A pool with adapter kind fake takes these keys under config (all optional).
// Numbers may be written as integers or as floats with no fractional part; negative
// numbers, fractional values for integer keys, wrong types and unknown keys are
// rejected with invalid_request naming the key.
//
//   - totalCPU (number), totalMemoryMiB (integer): the capacity of the one simulated
//     node. Setting either makes Capacity bounded; a dimension left unset is reported
//     as practically unlimited (1<<40). Every instance, in any state, holds its
//     resources until it is deleted. A request that leaves CPU or memory zero is
//     charged 1 CPU and 1024 MiB. A Create that does not fit answers
//     insufficient_capacity.
//   - createLatencyMs (integer): how long each Create that makes a new instance takes.
//     The instance is listed as pending meanwhile; cancelling the caller's context
//     aborts the creation and removes it.
//   - createErrors (list of codes): successive Create calls fail with these codes, one
//     per call, before Creates succeed. Allowed codes: insufficient_capacity,
//     sandbox_failed, provider_unavailable, invalid_request, internal.
//   - dropCreateResponses (integer): the first N Creates that make a new instance do
//     make it, then answer provider_unavailable as if the response were lost. A retry
//     with the same sandbox ID returns the existing instance.
//   - listError (bool): List fails with provider_unavailable.
//   - healthError (bool): Health fails with provider_unavailable.
//
// Faults drawn at random, so that a long run meets them throughout rather than only
// at its start. Rates are probabilities from 0 to 1 (0, the default, turns the fault
// off); a rate outside that range is rejected. They combine with the keys above,
// which apply first.
//
//   - faultSeed (integer): seeds the draws (default 0). Every draw comes from one
//     generator under the adapter's lock, so a seed gives the same faults for the
//     same sequence of calls; with concurrent callers, which call meets which fault
//     follows the order in which they reach the adapter. A rate of 0 draws nothing,
//     so turning one fault off does not move the others.
//   - createErrorRate (number): each Create fails with this probability, before it
//     looks for an existing instance, with a code drawn uniformly from
//     createErrorCodes. No instance is made.
//   - createErrorCodes (list of codes): the codes createErrorRate draws from; any
//     of those createErrors allows. Default: all five. An empty list is rejected.
//   - dropCreateResponseRate (number): each Create that would succeed (making a new
//     instance or finding the existing one) answers provider_unavailable instead,
//     with this probability, as if the response were lost. The instance exists.
//   - createLatencyJitterMs (integer): each Create that makes a new instance takes
//     createLatencyMs plus a duration drawn uniformly from 0 to this many
//     milliseconds.
//   - deleteErrorRate (number): each Delete fails with this probability, with a code
//     drawn uniformly from deleteErrorCodes, and deletes nothing.
//   - deleteErrorCodes (list of codes): provider_unavailable, internal or both (the
//     default).
//   - listErrorRate (number): each List fails with provider_unavailable with this
//     probability.
//   - execErrorRate (number): each Exec or ExecStream that would run a command (the
//     request is valid and the instance running) fails with this probability, with a
//     code drawn uniformly from execErrorCodes, and runs nothing. The message names
//     the code: "fake: injected exec failure (execErrorRate: <code>)". A streamed
//     exec's fault is, with even odds, one after output instead: the command runs,
//     ExecStream emits the start of its output (at least one byte, and fewer than
//     all when it has two or more; a length drawn uniformly) and then returns the
//     error, "fake: injected exec failure after output (execErrorRate: <code>)".
//     Over the adapter protocol that is a stream ending with an {"error": ...} line.
//     A command without output gets its fault before any.
//   - execErrorCodes (list of codes): the codes execErrorRate draws from, out of
//     provider_unavailable, insufficient_capacity, invalid_state, not_found and
//     internal (the default: all five). An empty list is rejected.
//   - execStreamDropRate (number): each ExecStream that would run a command and that
//     execErrorRate leaves alone is cut short with this probability, as if the
//     connection to the backend broke: the command runs, the start of its output is
//     emitted (as for a fault after output) and ExecStream returns
//     provider_unavailable, "fake: injected stream drop (execStreamDropRate)", with
//     ErrStreamDropped in its chain. Plain Exec never draws it. In process that is
//     one more failure after output; `differently-server adapter serve` turns it
//     into the real thing: it aborts the HTTP answer without a final event (the
//     connection closes and the chunked body never ends), so a client of the
//     adapter protocol meets a transport failure, not an {"error": ...} line. A
//     command without output is dropped before any, which closes the connection
//     before the status line.
//   - features (list): declared features, checked against the known names. Default:
//     every feature the fake implements (exec, exec.stream, files,
//     lifecycle.stop-start, persistence.disk, lifecycle.pause-resume, snapshots.disk,
//     snapshots.memory, fork, ports.expose). An empty list declares nothing. An
//     operation whose feature is not declared answers unsupported_operation, as on a
//     backend without it.
//   - templates (list of strings): accepted templates; a Create naming another one is
//     invalid_request. Empty (the default) accepts any. A Create without a template is
//     always accepted.
//   - regions (list of strings): regions reported in Capabilities.
//   - maxCPU (number), maxMemoryMiB, maxDiskGiB (integers): per-sandbox limits
//     reported in Capabilities; a Create asking for more is invalid_request.
//   - region (string): region reported on instances; defaults to the first of regions.
//
// Trust is not a config key: the pool's own trust setting is authoritative. Go
// callers can set Config.Trust, which Info reports (default private).
//
// # Behaviour
//
// Create works in this order: the request is checked (invalid_request, never
// consuming an injected fault); the next createErrors code, if any, is returned;
// createErrorRate is drawn; an existing instance for the sandbox ID is returned
// (after waiting for it if it is still being created), unless dropCreateResponseRate
// loses the answer; the snapshot and the capacity are checked; the instance is
// registered as pending, the latency (with its jitter) runs, and the instance
// becomes running. A dropCreateResponses loss, then a dropCreateResponseRate one,
// is reported last, with the instance already made.
//
// Exec and ExecStream answer invalid_state unless the instance is running. The
// default exec prints the command (or the args joined by spaces) and a newline on
// stdout and exits 0. ExecStream emits the result's stdout, then its stderr, as one
// event each (an execErrorRate fault after output cuts them short). Synchronous
// output is cut at api.MaxExecOutputBytes per stream.
//
// Files live in a map keyed by cleaned absolute path; directories exist implicitly
// while they hold a file. Paths with a ".." element or a NUL byte are invalid_request;
// a relative path is taken from "/". File operations need a running instance.
//
// Stop, Start, Pause and Resume are idempotent state flips. Stopping a paused
// instance, pausing a stopped one, starting a paused one and resuming a stopped one
// are invalid_state, as is any of them on a pending or failed instance.
//
// Snapshot copies the files. A disk snapshot can be taken of a running, paused or
// stopped instance, a memory snapshot only of a running or paused one. Snapshots
// outlive their instance. ExposePort returns https://<ref>-<port>.fake.invalid/ for a
// running instance.
//
// The fake keeps a simulated backend expiry, never acted on: the Create request's
// ttlSeconds, moved by RenewTTL (on an instance in any state; a missing one is
// not_found). Inspect reports it and how many renewals there were.
//
// Tests can also flip faults at run time (SetHealthError, SetListError), force an
// instance's state (SetState) and read counters (CreateCalls, Instances).
package fake
