package store

import (
	"context"
	"time"
)

// Store is everything the daemon persists. Implementations are safe for concurrent use by
// many goroutines and, for PostgreSQL, by many replicas sharing one database.
//
// Methods taking "now" never read the clock themselves: the caller passes its clock's now,
// which is what the row is stamped with and what time comparisons (claims, leases,
// backoff) are made against.
type Store interface {
	Watcher
	// Ping checks that the database answers (readiness).
	Ping(ctx context.Context) error
	// Close releases the connections. The Store must not be used afterwards.
	Close() error

	// InstallationID returns this database's installation ID (inst_<ulid>). It is created
	// on the first call (or by a migration) and never changes afterwards; concurrent first
	// calls from several connections or replicas all return the same ID.
	InstallationID(ctx context.Context) (string, error)

	// CreatePool stores a new pool stamped with now (CreatedAt, UpdatedAt) at Version 1
	// and returns it as stored; a pool without a Source is PoolFromAPI. An existing
	// name is invalid_state.
	CreatePool(ctx context.Context, now time.Time, p Pool) (Pool, error)
	// GetPool returns the named pool, or not_found.
	GetPool(ctx context.Context, name string) (Pool, error)
	// ListPools returns every pool, sorted by name.
	ListPools(ctx context.Context) ([]Pool, error)
	// UpdatePool replaces the pool named p.Name if its stored Version equals p.Version
	// (invalid_state otherwise; not_found when missing), bumps Version and sets
	// UpdatedAt=now. CreatedAt is kept. Source is written as given and must be set.
	UpdatePool(ctx context.Context, now time.Time, p Pool) (Pool, error)
	// DeletePool removes the named pool; not_found when missing, invalid_state while a
	// sandbox in a non-terminal state references it (terminate those first), and
	// invalid_state (ConfigPool) for a pool whose Source is PoolFromConfig, checked
	// under the same lock as the delete, so a replica's start that takes a pool over
	// and a delete through another replica's API cannot interleave. The pool's warm
	// statistics go with it.
	DeletePool(ctx context.Context, name string) error
	// AddWarmStats adds each of deltas' counts to those stored for its pool and shape,
	// starting from zero for a pair not stored yet, in one transaction. The counts of
	// a pool the store does not hold are dropped: DeletePool removes a pool's, and
	// they do not come back with a pool created later under the same name.
	AddWarmStats(ctx context.Context, deltas []WarmStats) error
	// ListWarmStats returns the counts stored for the named pool's shapes, sorted by
	// shape.
	ListWarmStats(ctx context.Context, pool string) ([]WarmStats, error)

	// CreateSandbox stores a new sandbox. CreatedAt, UpdatedAt and StateChangedAt are set
	// to now, NextAttemptAt defaults to now when zero, Version is 1, State defaults to
	// queued. When IdempotencyKey is set it is unique per project (organisation and
	// name): a create repeating an (org, project, key) triple returns the existing sandbox and created=false instead, and
	// concurrent creates with one key make exactly one sandbox. An existing ID is
	// invalid_state.
	CreateSandbox(ctx context.Context, now time.Time, sb Sandbox) (out Sandbox, created bool, err error)
	// CreateSandboxAdmitted is CreateSandbox with admission control in the same
	// transaction. A repeated idempotency key returns the existing sandbox (created=false)
	// without any check. Otherwise, holding a lock on (sb.Org, sb.Project) that every
	// CreateSandboxAdmitted and PutProject of that project takes (a row or advisory lock
	// on PostgreSQL, the single writer on SQLite), it reads the project's quota, its
	// usage and the global number of queued sandboxes, calls admit with them, and inserts
	// only when admit returns nil; admit's error is returned as is. So concurrent creates
	// can never take a project over its quota. admit makes the sandbox's first
	// transitions on the copy it is shown (server/sandboxes calls lifecycle.Create, and
	// lifecycle.Place for a create that starts at once when no queued sandbox is due),
	// and the row is inserted with what they wrote, their events included. admit must
	// be quick and must not call the Store. It may be called more than once, each time
	// on a fresh copy of sb (Pending included): a driver may admit on the assumption of
	// a project without a quota and an empty queue, and check that assumption in the
	// insert itself, before admitting again with what it reads.
	CreateSandboxAdmitted(ctx context.Context, now time.Time, sb Sandbox, admit func(Admission, *Sandbox) error) (out Sandbox, created bool, err error)
	// ClaimWarm stores sb, a new sandbox, by taking over a running warm sandbox of
	// (WarmOrg, project) on pool rather than inserting a row. In one transaction it
	// looks sb's idempotency key up (a repeat gets the sandbox holding it and
	// created=false, as from CreateSandboxAdmitted), reads sb's project's admission as
	// CreateSandboxAdmitted does (with its lock when the quota limits anything), takes
	// the warm sandbox that has waited longest among those no other transaction holds,
	// and calls claim with both: claim checks the admission, makes sb from the warm
	// one (server/lifecycle.Claim: sb takes its ID, instance and state) and may
	// refuse, returning an error that is returned as is with nothing written. The warm
	// row is then replaced by sb's, a new sandbox under the warm one's ID, with sb's
	// pending events. ErrNoWarm, with nothing written, when no warm sandbox is free.
	// sb's ID is ignored.
	ClaimWarm(ctx context.Context, now time.Time, sb Sandbox, pool, project string,
		claim func(a Admission, warm Sandbox, sb *Sandbox) error) (out Sandbox, created bool, err error)
	// GetSandbox returns the sandbox, or not_found.
	GetSandbox(ctx context.Context, id string) (Sandbox, error)
	// ListSandboxes returns one page of the sandboxes matching f, ordered by ID (ULIDs,
	// so by creation time), and the cursor of the next page ("" on the last page). A
	// malformed cursor is invalid_request.
	ListSandboxes(ctx context.Context, f SandboxFilter) (items []Sandbox, nextCursor string, err error)
	// EachSandbox calls fn with every sandbox f selects (Limit and Cursor are
	// ignored), in ID order, from one query: one consistent read, however many rows,
	// for a caller that needs them all (the reconciler). fn's error ends the walk and
	// is returned as is. fn must not call the Store.
	EachSandbox(ctx context.Context, f SandboxFilter, fn func(Sandbox) error) error
	// UpdateSandbox is the one way a sandbox changes: in a single transaction it locks
	// the row, calls fn with the current value, and writes what fn left, bumping Version
	// and setting UpdatedAt=now (and StateChangedAt=now when State changed). ID,
	// CreatedAt and Version cannot be changed by fn. When fn returns an error nothing is
	// written and that error is returned as is. fn may run while other writers wait, so
	// it must be quick and must not call the Store. not_found when the sandbox is missing.
	UpdateSandbox(ctx context.Context, id string, now time.Time, fn func(*Sandbox) error) (Sandbox, error)
	// UpdateSandboxes is UpdateSandbox for many sandboxes in one transaction: it locks
	// the rows of ids (in ID order, so concurrent batches cannot deadlock) and calls fn
	// with each index and current value. A sandbox for which fn returns an error is not
	// written, and errs[i] holds that error, as does errs[i] not_found for a missing
	// sandbox; the others are written and out[i] holds their new value. err is set only
	// when the transaction itself failed, and then nothing was written. The rules of
	// UpdateSandbox apply to fn; ids must be distinct.
	UpdateSandboxes(ctx context.Context, ids []string, now time.Time, fn func(i int, sb *Sandbox) error) (out []Sandbox, errs []error, err error)
	// UpdateKnownSandboxes is UpdateSandboxes for a writer that holds each sandbox as
	// the store last returned it (known[i], IDs distinct): a store may apply fn to
	// known[i] and write the result without reading the row first, but only where the
	// stored row is still known[i] (its Version, and the claim ClaimSandboxes changes
	// without a Version). Any other row is written as UpdateSandboxes writes it, fn
	// being called again with the stored value, so fn may run more than once for an
	// index and must leave what it returns, and any state of its own, as the last run
	// decided. The outcome is the one UpdateSandboxes would give for the same ids,
	// except that the two kinds of rows may be written in separate transactions: err
	// is set only when nothing was written, and a failure after some rows were
	// written is the error of each row it left unwritten.
	UpdateKnownSandboxes(ctx context.Context, known []Sandbox, now time.Time, fn func(i int, sb *Sandbox) error) (out []Sandbox, errs []error, err error)
	// ClaimSandboxes atomically leases up to limit queued sandboxes that are due
	// (NextAttemptAt <= now) and not under a live claim (ClaimExpiresAt unset or <= now),
	// oldest NextAttemptAt then ID first, setting ClaimedBy=claimer and
	// ClaimExpiresAt=now+lease. Two claimers, on any connection or replica, never get the
	// same sandbox while a claim is live. A claim is not a change of the sandbox: Version
	// and UpdatedAt stay. Release it with UpdateSandbox (clear ClaimedBy/ClaimExpiresAt).
	ClaimSandboxes(ctx context.Context, now time.Time, claimer string, lease time.Duration, limit int) ([]Sandbox, error)
	// CountSandboxesByPool counts the sandboxes in any of states, by pool name ("" for
	// sandboxes not yet placed). Pools with no such sandbox are absent from the map.
	CountSandboxesByPool(ctx context.Context, states []State) (map[string]int, error)
	// CountSandboxesByState counts the sandboxes in any of states, by state. States
	// with no sandbox are absent from the map.
	CountSandboxesByState(ctx context.Context, states []State) (map[State]int, error)

	// ListEvents returns one page of the events f selects and the cursor that
	// continues after it. The cursor is returned on every page, the last included: a
	// follower passes it back as f.After to get what was appended since, and misses no
	// event even when transactions commit in another order than they appended (on
	// PostgreSQL an event is only shown once every transaction that began before its
	// own has ended, so nothing can appear behind a cursor). Events of one sandbox
	// come in Seq order. A malformed cursor is invalid_request.
	ListEvents(ctx context.Context, f EventFilter) (items []Event, next string, err error)
	// PruneEvents deletes the events that r no longer keeps (see EventRetention), in
	// bounded batches, and returns how many it deleted.
	PruneEvents(ctx context.Context, now time.Time, r EventRetention) (int, error)

	// RecordReconcilePass appends a finished reconcile pass, ID set by the store,
	// and deletes, in the same transaction, every pass but the newest keep (0 keeps
	// every one). It returns the pass as stored.
	RecordReconcilePass(ctx context.Context, p ReconcilePass, keep int) (ReconcilePass, error)
	// ListReconcilePasses returns one page of the recorded passes, newest first, and
	// the cursor of the next page ("" on the last page). A malformed cursor is
	// invalid_request.
	ListReconcilePasses(ctx context.Context, f ReconcilePassFilter) (items []ReconcilePass, nextCursor string, err error)

	// PutProject creates or replaces the project (org, name): CreatedAt is kept on a
	// replace, UpdatedAt=now, Version bumped (1 on create).
	PutProject(ctx context.Context, now time.Time, p Project) (Project, error)
	// GetProject returns the stored project, or not_found when it was never put (the
	// project may still exist implicitly, with no quota).
	GetProject(ctx context.Context, org, name string) (Project, error)
	// ListProjects returns every stored project, sorted by org then name.
	ListProjects(ctx context.Context) ([]Project, error)
	// DeleteProject removes the stored project (its quota); not_found when missing,
	// invalid_state while a sandbox of the project is in a non-terminal state.
	DeleteProject(ctx context.Context, org, name string) error
	// ProjectUsage counts the project's non-terminal sandboxes and sums their requested
	// resources; a project with none (or never seen) has the zero Usage.
	ProjectUsage(ctx context.Context, org, name string) (Usage, error)

	// PutProfile creates or replaces the named profile (CreatedAt kept on a replace,
	// UpdatedAt=now, Version bumped).
	PutProfile(ctx context.Context, now time.Time, p Profile) (Profile, error)
	// GetProfile returns the named profile, or not_found.
	GetProfile(ctx context.Context, name string) (Profile, error)
	// ListProfiles returns every profile, sorted by name.
	ListProfiles(ctx context.Context) ([]Profile, error)
	// DeleteProfile removes the named profile; not_found when missing. Sandboxes made
	// from it keep what it gave them (and its name).
	DeleteProfile(ctx context.Context, name string) error

	// CreateSnapshot stores a snapshot with CreatedAt=now; an existing ID is invalid_state.
	CreateSnapshot(ctx context.Context, now time.Time, sn Snapshot) (Snapshot, error)
	// GetSnapshot returns the snapshot, or not_found.
	GetSnapshot(ctx context.Context, id string) (Snapshot, error)
	// ListSnapshots returns the snapshots of one sandbox, ordered by ID.
	ListSnapshots(ctx context.Context, sandboxID string) ([]Snapshot, error)
	// ListSnapshotPage returns a page of the snapshots f selects, ordered by ID, and
	// the next page's cursor ("" after the last).
	ListSnapshotPage(ctx context.Context, f SnapshotFilter) (items []Snapshot, nextCursor string, err error)
	// DeleteSnapshot removes a snapshot; not_found when missing.
	DeleteSnapshot(ctx context.Context, id string) error

	// CreateToken stores a token (by hash) with CreatedAt=now; a duplicate ID or hash is
	// invalid_state.
	CreateToken(ctx context.Context, now time.Time, tok Token) (Token, error)
	// TokenByHash finds the token whose secret hashes to hash, or not_found.
	TokenByHash(ctx context.Context, hash []byte) (Token, error)
	// ListTokens returns every token, ordered by ID.
	ListTokens(ctx context.Context) ([]Token, error)
	// TouchToken sets LastUsedAt=now; not_found when missing.
	TouchToken(ctx context.Context, id string, now time.Time) error
	// DeleteToken removes a token; not_found when missing.
	DeleteToken(ctx context.Context, id string) error

	// GetPolicy returns the global policy, or the zero Policy when none was ever put.
	GetPolicy(ctx context.Context) (Policy, error)
	// PutPolicy replaces the global policy.
	PutPolicy(ctx context.Context, p Policy) error

	// TryLease acquires or renews the named lease for holder until now+ttl when it is
	// free, expired (expiry <= now) or already held by holder, and reports whether holder
	// now holds it. Leader election is a lease named "leader".
	TryLease(ctx context.Context, name, holder string, now time.Time, ttl time.Duration) (bool, error)
	// ReleaseLease gives the lease up if holder holds it; otherwise it does nothing.
	ReleaseLease(ctx context.Context, name, holder string) error
}
