package sandboxes

import (
	"errors"
	"sync"

	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/server/defaults"
)

// Defaults of Options.MaxTransfers, MaxProjectTransfers and LargeTransferBytes (the
// config's files section).
const (
	DefaultMaxTransfers        = defaults.MaxTransfers
	DefaultMaxProjectTransfers = defaults.MaxProjectTransfers
	DefaultLargeTransferBytes  = defaults.LargeTransferBytes
)

// ErrTransferLimit is wrapped by the refusal of a transfer over the bound: the
// upload's content was not read, and the caller must not wait for it before
// answering (server/httpapi/files.go closes the connection instead).
var ErrTransferLimit = errors.New("too many large file transfers")

// limitError is a transfer's refusal: its retry hint, and ErrTransferLimit.
type limitError struct{ error }

func (e limitError) Is(target error) bool { return target == ErrTransferLimit }
func (e limitError) Unwrap() error        { return e.error }

// transferRetryAfter is the retry hint, in seconds, of a transfer refused because
// too many are in flight: a large one takes seconds.
const transferRetryAfter = 2

// transfers bounds the large file transfers (uploads and downloads) in flight, for
// the whole daemon and for each project. A transfer streamed to or from an adapter
// costs little memory, but one whose adapter holds files whole costs up to
// api.MaxFileBytes, and each ties up a backend connection and bandwidth; without a
// bound, a burst of them could take the daemon's memory, and one project could take
// every slot. A transfer over the bound is refused at once rather than queued, so
// that nothing waits while holding a connection and the client's retry finds a
// free slot.
type transfers struct {
	max, perProject int
	// large is the size from which a transfer counts; one of unknown size counts.
	large int64

	mu        sync.Mutex
	inFlight  int
	byProject map[string]int
}

func newTransfers(max, perProject int, large int64) *transfers {
	return &transfers{max: max, perProject: perProject, large: large, byProject: map[string]int{}}
}

// counts reports whether a transfer of size bytes (negative: unknown) takes a slot.
func (t *transfers) counts(size int64) bool { return size < 0 || size > t.large }

// acquire takes a slot for project, or refuses with provider_unavailable and a
// retry hint. release gives the slot back; it must be called exactly once.
func (t *transfers) acquire(project string) (release func(), err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case t.inFlight >= t.max:
		// How busy the daemon is with other tenants is not this caller's to learn.
		return nil, limitError{RetryAfter(api.Errorf(api.CodeProviderUnavailable,
			"the daemon is serving as many large file transfers as it allows; try again later").
			WithDetail("limit", "files.maxTransfers"), transferRetryAfter)}
	case t.byProject[project] >= t.perProject:
		return nil, limitError{RetryAfter(api.Errorf(api.CodeProviderUnavailable,
			"project %s has %d large file transfers in flight, the most it may; try again once one has ended",
			project, t.perProject).WithDetail("limit", "files.maxProjectTransfers"), transferRetryAfter)}
	}
	t.inFlight++
	t.byProject[project]++
	var once sync.Once
	return func() {
		once.Do(func() {
			t.mu.Lock()
			defer t.mu.Unlock()
			t.inFlight--
			if t.byProject[project]--; t.byProject[project] == 0 {
				delete(t.byProject, project)
			}
		})
	}, nil
}
