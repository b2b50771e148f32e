// Package sandboxes is the sandbox service: what the public API does to sandboxes,
// without the HTTP. server/httpapi decodes a request, calls a Service method with
// the caller's identity and plain Go values, and encodes what comes back; every
// error a method returns is an *api.Error (or wraps one, or is internal), which
// server/httpapi/errors.go maps to an HTTP answer in one place.
//
// A create has one path (Create, create.go):
//
//	request -> Service.Create
//	  validate the sandbox (features, labels, resources, TTL, template, placement, env)
//	  placement check: could some pool ever take it? (server/placement, with the policy)
//	  reserve a start slot on this replica's scheduler when no queue stands before it
//	  admission, in the store's transaction that inserts (quota, queue bound), with
//	    lifecycle.Create, and lifecycle.Place through the reserved slot
//	  -> the scheduler's direct start (scheduler.Start) begins the Create at once,
//	     or the sandbox waits queued for a scheduler pass, which is woken.
//
// The caller's identity and tenancy are parameters (Caller), never read from a
// context: the service does not know how a caller proved who it is. Every change of
// a sandbox's state goes through server/lifecycle, whose package doc lists the
// transitions.
package sandboxes

import (
	"go.opentelemetry.io/otel/trace"

	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/internal/clock"
	"github.com/different-ai/differently/server/defaults"
	"github.com/different-ai/differently/server/lifecycle"
	"github.com/different-ai/differently/server/pools"
	"github.com/different-ai/differently/server/scheduler"
	"github.com/different-ai/differently/server/store"
)

// Caller is who calls the service: an admin, or one project's token.
type Caller struct {
	// TokenID is the token the call was made with, recorded as the actor of the
	// changes it makes.
	TokenID string
	// Admin may see and change every project's objects.
	Admin bool
	// Org and Project are a project token's own; empty for an admin.
	Org, Project string
}

// Owns reports whether the caller may see an object of org and project.
func (c Caller) Owns(org, project string) bool {
	return c.Admin || c.Org == org && c.Project == project
}

// Actor is the caller as recorded in the events of the changes it makes.
func (c Caller) Actor() lifecycle.Actor { return lifecycle.Token(c.TokenID) }

// Pools is the pool manager as the service sees it: each pool's current view.
type Pools interface {
	// Views returns every pool's current view.
	Views() []pools.View
	// View returns one pool's view, false when the pool has none (yet).
	View(name string) (pools.View, bool)
}

// Waker wakes the scheduler loop that acts on sandboxes entering a state, so that a
// queued or terminating sandbox is handled now rather than at its next tick.
type Waker interface {
	Wake(state store.State)
}

// Direct is the replica's scheduler, to which the service hands a new sandbox or a
// deletion at once when it can, instead of leaving it for a pass
// (server/scheduler/direct.go).
type Direct interface {
	Reserve(ctx context.Context, ranked []string) *scheduler.Start
	ReserveDelete() *scheduler.Delete
}

// DefaultMaxQueued is the queue bound when Options.MaxQueued is 0 (the config's
// scheduler.maxQueued default).
const DefaultMaxQueued = defaults.MaxQueued

// Options wires the service to the rest of the daemon.
type Options struct {
	// Store and Pools are required.
	Store store.Store
	Pools Pools
	// Waker is woken after changes the scheduler must act on; nil wakes nobody (the
	// scheduler then finds the work on its next tick).
	Waker Waker
	// Direct takes new sandboxes and deletions at once when it can; nil leaves all of
	// them to the scheduler's passes.
	Direct Direct
	// Writes is the replica's group commit, shared with the scheduler: the
	// service's changes of a sandbox go through it. nil: each is a transaction of
	// its own.
	Writes *store.Batcher
	// Policy reads the placement policy, through a cache where the caller keeps one
	// (server/httpapi/cache.go); nil reads the store every time.
	Policy func(ctx context.Context) (store.Policy, error)
	// MaxQueued bounds the queued sandboxes (all projects): a create finding that
	// many waiting is refused with provider_unavailable and a retry hint. 0 means
	// DefaultMaxQueued.
	MaxQueued int
	// MaxTransfers and MaxProjectTransfers bound the file transfers larger than
	// LargeTransferBytes (or of unknown size) in flight, in all and per project; one
	// more is refused with provider_unavailable and a retry hint. 0 means the
	// Default of each.
	MaxTransfers        int
	MaxProjectTransfers int
	LargeTransferBytes  int64
	// Clock defaults to the system clock.
	Clock clock.Clock
	// Logger defaults to one that discards.
	Logger *slog.Logger
	// Tracer, when set, makes spans of a create's placement and admission; nil
	// makes none.
	Tracer trace.Tracer
	// OnWarmClaim, when set, is told the pool of each warm sandbox a create took (its
	// filler then starts another at once).
	OnWarmClaim func(pool string)
	// WarmObserver, when set, is told of each create a warm shape matched: a hit on
	// pool's shape with how long the claim took, or a miss, counted against the first
	// pool and shape that matched (the one placement ranked first).
	WarmObserver func(pool string, shape store.WarmShape, o WarmOutcome, took time.Duration)
}

// Service carries out the API's operations on sandboxes.
type Service struct {
	st        store.Store
	pools     Pools
	waker     Waker
	direct    Direct
	writes    *store.Batcher
	policy    func(ctx context.Context) (store.Policy, error)
	maxQueued int
	transfers *transfers
	clock     clock.Clock
	log       *slog.Logger
	tracer    trace.Tracer
	// onClaim and warmObserver are Options.OnWarmClaim and WarmObserver.
	onClaim      func(pool string)
	warmObserver func(pool string, shape store.WarmShape, o WarmOutcome, took time.Duration)
}

type nopWaker struct{}

func (nopWaker) Wake(store.State) {}

// New builds a service from opts.
func New(opts Options) (*Service, error) {
	if opts.Store == nil || opts.Pools == nil {
		return nil, errors.New("sandboxes: Options.Store and Options.Pools are required")
	}
	s := &Service{
		st: opts.Store, pools: opts.Pools, waker: opts.Waker, direct: opts.Direct, writes: opts.Writes,
		policy: opts.Policy, clock: opts.Clock, log: opts.Logger, tracer: opts.Tracer,
		onClaim: opts.OnWarmClaim, warmObserver: opts.WarmObserver,
	}
	if s.waker == nil {
		s.waker = nopWaker{}
	}
	if s.policy == nil {
		s.policy = s.st.GetPolicy
	}
	s.maxQueued = cmp.Or(max(opts.MaxQueued, 0), DefaultMaxQueued)
	s.transfers = newTransfers(cmp.Or(max(opts.MaxTransfers, 0), DefaultMaxTransfers),
		cmp.Or(max(opts.MaxProjectTransfers, 0), DefaultMaxProjectTransfers),
		cmp.Or(max(opts.LargeTransferBytes, 0), DefaultLargeTransferBytes))
	if s.clock == nil {
		s.clock = clock.Real{}
	}
	if s.log == nil {
		s.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return s, nil
}

// now is the clock's time; every timestamp the service stores comes from here.
func (s *Service) now() time.Time { return s.clock.Now() }

// errUnchanged aborts an UpdateSandbox whose callback found nothing to write.
var errUnchanged = errors.New("unchanged")

// update is the service's one way to change a sandbox: store.UpdateSandbox, in a
// transaction shared with the replica's other writes when there is a Batcher. fn
// may then run twice (store.Batcher.UpdateSandboxRepeatable), and must leave what
// it returns, and any state of its own, as its last run decided.
func (s *Service) update(ctx context.Context, id string, fn func(*store.Sandbox) error) (store.Sandbox, error) {
	if s.writes != nil {
		return s.writes.UpdateSandboxRepeatable(ctx, id, fn)
	}
	return s.st.UpdateSandbox(ctx, id, s.now(), fn)
}

// Sandbox returns a sandbox the caller may see. Another project's sandbox answers
// exactly like a missing one, so that IDs cannot be probed.
func (s *Service) Sandbox(ctx context.Context, c Caller, id string) (store.Sandbox, error) {
	sb, err := s.st.GetSandbox(ctx, id)
	if api.IsCode(err, api.CodeNotFound) {
		return store.Sandbox{}, notFound("sandbox", id)
	}
	if err != nil {
		return store.Sandbox{}, fmt.Errorf("get sandbox %s: %w", id, err)
	}
	if !c.Owns(sb.Org, sb.Project) {
		return store.Sandbox{}, notFound("sandbox", id)
	}
	return sb, nil
}

// RetryAfterError is an error whose answer tells the client how many seconds to
// wait before trying again (server/httpapi/errors.go sends it as Retry-After).
type RetryAfterError struct {
	Err     *api.Error
	Seconds int
}

// RetryAfter wraps err with the seconds a client should wait before retrying.
func RetryAfter(err *api.Error, seconds int) error {
	return &RetryAfterError{Err: err, Seconds: seconds}
}

func (e *RetryAfterError) Error() string { return e.Err.Error() }
func (e *RetryAfterError) Unwrap() error { return e.Err }

// notFound is the answer for a missing object and for another tenant's object alike.
func notFound(kind, id string) *api.Error {
	return api.Errorf(api.CodeNotFound, "%s %q not found", kind, id)
}

func ptr[T any](v T) *T { return &v }
