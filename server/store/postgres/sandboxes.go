package postgres

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/different-ai/differently/server/store"
)

// sandboxColumns is the column order of sandboxArgs and scanSandbox.
const sandboxColumns = `id, org, project, state, pool, region, backend_ref, template, profile,
	capabilities, cpu, memory_mib, disk_gib, labels, env, ttl_seconds, expires_at, from_snapshot,
	placement, attempts, reason, next_attempt_at, claimed_by, claim_expires_at, idempotency_key,
	created_at, updated_at, state_changed_at, version, avoid_pool, avoid_until, request_hash, init_commands`

const sandboxParams = `$1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17,
	$18, $19, $20, $21, $22, $23, $24, $25, $26, $27, $28, $29, $30, $31, $32, $33`

func scanSandbox(row pgx.Row) (store.Sandbox, error) {
	var sb store.Sandbox
	var caps, labels, env, placement, initCommands []byte
	err := row.Scan(&sb.ID, &sb.Org, &sb.Project, &sb.State, &sb.Pool, &sb.Region, &sb.BackendRef,
		&sb.Template, &sb.Profile, &caps, &sb.Resources.CPU, &sb.Resources.MemoryMiB,
		&sb.Resources.DiskGiB, &labels, &env, &sb.TTLSeconds, &sb.ExpiresAt, &sb.FromSnapshot,
		&placement, &sb.Attempts, &sb.Reason, &sb.NextAttemptAt, &sb.ClaimedBy, &sb.ClaimExpiresAt,
		&sb.IdempotencyKey, &sb.CreatedAt, &sb.UpdatedAt, &sb.StateChangedAt, &sb.Version,
		&sb.AvoidPool, &sb.AvoidUntil, &sb.RequestHash, &initCommands)
	if err != nil {
		return sb, err
	}
	for _, f := range []struct {
		b []byte
		v any
	}{{caps, &sb.Capabilities}, {labels, &sb.Labels}, {env, &sb.Env}, {placement, &sb.Placement}, {initCommands, &sb.InitCommands}} {
		if err := store.UnmarshalJSON(f.b, f.v); err != nil {
			return sb, err
		}
	}
	if len(sb.InitCommands) == 0 {
		sb.InitCommands = nil // [] in the column, none either way
	}
	return store.NormalizeSandboxTimes(sb), nil
}

func sandboxArgs(sb store.Sandbox) ([]any, error) {
	var js [5][]byte
	for i, v := range []any{sb.Capabilities, sb.Labels, sb.Env, sb.Placement, nonNilStrings(sb.InitCommands)} {
		b, err := store.MarshalJSON(v)
		if err != nil {
			return nil, err
		}
		js[i] = b
	}
	return []any{sb.ID, sb.Org, sb.Project, string(sb.State), sb.Pool, sb.Region, sb.BackendRef,
		sb.Template, sb.Profile, js[0], sb.Resources.CPU, sb.Resources.MemoryMiB, sb.Resources.DiskGiB,
		js[1], js[2], sb.TTLSeconds, sb.ExpiresAt, sb.FromSnapshot, js[3], sb.Attempts, sb.Reason,
		sb.NextAttemptAt, sb.ClaimedBy, sb.ClaimExpiresAt, sb.IdempotencyKey, sb.CreatedAt,
		sb.UpdatedAt, sb.StateChangedAt, sb.Version, sb.AvoidPool, sb.AvoidUntil, sb.RequestHash, js[4]}, nil
}

func collectSandboxes(rows pgx.Rows, err error) ([]store.Sandbox, error) {
	return collectSandboxesCap(rows, err, 0)
}

// collectSandboxesCap is collectSandboxes for a query that returns about n rows: a
// sandbox is some 500 bytes, and a batch's rows appended one by one would copy them
// all at each doubling.
func collectSandboxesCap(rows pgx.Rows, err error, n int) ([]store.Sandbox, error) {
	if err != nil {
		return nil, wrap(err)
	}
	defer rows.Close()
	var out []store.Sandbox
	if n > 0 {
		out = make([]store.Sandbox, 0, n)
	}
	for rows.Next() {
		sb, err := scanSandbox(rows)
		if err != nil {
			return nil, wrap(err)
		}
		out = append(out, sb)
	}
	return out, wrap(rows.Err())
}

// CreateSandbox implements store.Store. With a key, ON CONFLICT DO NOTHING on the partial
// unique index makes a concurrent duplicate wait for the winner's commit and insert
// nothing; the SELECT that follows (a new statement, so a new snapshot) then sees the winner.
func (s *Store) CreateSandbox(ctx context.Context, now time.Time, sb store.Sandbox) (store.Sandbox, bool, error) {
	sb, err := store.NormalizeSandbox(now, sb)
	if err != nil {
		return store.Sandbox{}, false, err
	}
	var out store.Sandbox
	var created bool
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		out, created, err = insertSandbox(ctx, tx, sb)
		return err
	})
	if err != nil {
		return store.Sandbox{}, false, err
	}
	if created {
		s.notify.sandbox(out)
	}
	return out, created, nil
}

// CreateSandboxAdmitted implements store.Store. For a project with a quota, the
// project's advisory lock (see limitedAdmission) serialises its admissions across
// connections and replicas; READ COMMITTED gives each statement after it a fresh
// snapshot, so the usage read includes every sandbox admitted before the lock was
// granted. A project without one takes two round trips (pipelinedTx): BEGIN with
// the key lookup and the admission read, then the INSERT with COMMIT.
func (s *Store) CreateSandboxAdmitted(ctx context.Context, now time.Time, sb store.Sandbox, admit func(store.Admission, *store.Sandbox) error) (store.Sandbox, bool, error) {
	sb, err := store.NormalizeSandbox(now, sb)
	if err != nil {
		return store.Sandbox{}, false, err
	}
	if out, ok, err := s.createSandboxClear(ctx, sb, admit); err != nil || ok {
		return out, ok, err
	}
	key := sb.IdempotencyKey
	var a store.Admission
	tx, existing, err := s.beginAdmission(ctx, sb, now, &a, false, nil, nil)
	switch {
	case err != nil:
		return store.Sandbox{}, false, err
	case existing != nil:
		// A retry is never refused, and needs no write.
		return *existing, false, nil
	}
	defer tx.Rollback() // on every return before Commit, and after a panic
	if admit != nil {
		err = admit(a, &sb)
	}
	var q string
	var args []any
	if err == nil {
		q, args, err = insertArgs(sb, insertSandboxSQL, insertSandboxEventsSQL)
	}
	if err != nil {
		return store.Sandbox{}, false, err
	}
	var writes pgx.Batch
	writes.Queue(q, args...)
	var out store.Sandbox
	conflict := false
	err = tx.Commit(&writes, func(br pgx.BatchResults) error {
		var err error
		out, err = scanSandbox(br.QueryRow())
		if isNoRows(err) && key != "" {
			// A concurrent create with the key committed first; the lookup below
			// (a new snapshot) finds its sandbox.
			conflict = true
			return nil
		}
		return translate(err, "sandbox", sb.ID)
	})
	switch {
	case err != nil:
		return store.Sandbox{}, false, err
	case conflict:
		out, err = scanSandbox(s.pool.QueryRow(ctx, selectByKeySQL, sb.Org, sb.Project, key))
		return out, false, translate(err, "sandbox", sb.ID)
	}
	s.notify.sandbox(out)
	return out, true, nil
}

// createSandboxClear is CreateSandboxAdmitted's common case in one round trip: the
// sandbox is admitted as if its project had no quota and no sandbox were queued (a
// zero Admission), and inserted by one statement, atomic on its own, that inserts
// nothing unless that holds. ok is false, with nothing written, when admit refused
// the zero Admission, when the statement found a quota or a queued sandbox, or when
// the idempotency key is taken: the caller then admits with what it reads. The
// statement checks in its own snapshot what the full path reads in its first, so the
// two see the same races: a quota put meanwhile applies from the next create on, as
// for any project whose admission takes no lock. Concurrent ones share a
// transaction (creates.go).
func (s *Store) createSandboxClear(ctx context.Context, sb store.Sandbox, admit func(store.Admission, *store.Sandbox) error) (store.Sandbox, bool, error) {
	if admit != nil {
		if err := admit(store.Admission{}, &sb); err != nil {
			return store.Sandbox{}, false, nil
		}
	}
	q, args, err := insertArgs(sb, insertClearSQL, insertClearEventsSQL)
	if err != nil {
		return store.Sandbox{}, false, err
	}
	// The caller's sandbox lends its maps and lists to the answer: it gets its own,
	// as from a read.
	row := asRead(sb)
	row.Capabilities, row.InitCommands = slices.Clone(row.Capabilities), slices.Clone(row.InitCommands)
	row.Labels, row.Env = maps.Clone(row.Labels), maps.Clone(row.Env)
	row.Placement.AllowedPools = slices.Clone(row.Placement.AllowedPools)
	row.Placement.Regions = slices.Clone(row.Placement.Regions)
	return s.creates.insert(ctx, row, q, args)
}

// asRead returns a sandbox about to be written as a read of the written row returns
// it: every column of the row is sb's, so an insert or update that writes it need not
// send it back. A read has no pending events (they are written with the row), none
// for empty init commands (stored as []), and none for a placement's empty lists,
// which its JSON leaves out; its times are stored to the microsecond.
func asRead(sb store.Sandbox) store.Sandbox {
	sb.Pending = nil
	if len(sb.InitCommands) == 0 {
		sb.InitCommands = nil
	}
	if len(sb.Placement.AllowedPools) == 0 {
		sb.Placement.AllowedPools = nil
	}
	if len(sb.Placement.Regions) == 0 {
		sb.Placement.Regions = nil
	}
	return store.NormalizeSandboxTimes(sb)
}

// insertClearSQL inserts a sandbox only when its project ($2, $3) has no quota and
// no sandbox is queued, and not when its idempotency key is taken. It returns the
// ID alone, which says whether it inserted: the row is the one it was given.
const insertClearSQL = `INSERT INTO sandboxes (` + sandboxColumns + `)
	SELECT ` + sandboxParams + `
	WHERE NOT EXISTS (SELECT 1 FROM projects p WHERE p.org = $2 AND p.name = $3
			AND (p.quota_sandboxes <> 0 OR p.quota_cpu <> 0 OR p.quota_memory_mib <> 0 OR p.quota_disk_gib <> 0))
		AND NOT EXISTS (SELECT 1 FROM sandboxes q WHERE q.state = 'queued')
	ON CONFLICT (org, project, idempotency_key) WHERE idempotency_key <> '' DO NOTHING
	RETURNING id`

// selectByKeySQL finds the sandbox holding an idempotency key ($3) in a project.
// The redundant idempotency_key <> ” is the predicate of the unique index
// sandboxes_idempotency, which a generic plan (a claim runs on those) can only use
// when the statement states it (TestClaimUsesIndexes).
const selectByKeySQL = `SELECT ` + sandboxColumns + ` FROM sandboxes
	WHERE org = $1 AND project = $2 AND idempotency_key = $3 AND idempotency_key <> ''`

// readByKey reads the answer of selectByKeySQL: the sandbox holding the key, or nil.
func readByKey(row pgx.Row) (*store.Sandbox, error) {
	got, err := scanSandbox(row)
	switch {
	case err == nil:
		return &got, nil
	case isNoRows(err):
		return nil, nil
	}
	return nil, wrap(err)
}

// beginAdmission begins a create's transaction as pipelinedTx does, BEGIN travelling
// with its reads: the idempotency key's lookup when sb has a key, the admission of
// sb's project into a, and the statements more queues, whose results readMore
// consumes; generic runs them all on their generic plans (genericPlansSQL). A key
// already taken ends the transaction and comes back as existing. A project whose
// quota limits something is then locked and admitted in full (admitLimited), and a
// key found taken under that lock ends the transaction too. Otherwise the caller
// ends tx.
func (s *Store) beginAdmission(ctx context.Context, sb store.Sandbox, now time.Time, a *store.Admission, generic bool,
	more func(*pgx.Batch), readMore func(pgx.BatchResults) error) (tx *pipelinedTx, existing *store.Sandbox, err error) {
	key := sb.IdempotencyKey
	var reads pgx.Batch
	if generic {
		reads.Queue(genericPlansSQL)
	}
	if key != "" {
		reads.Queue(selectByKeySQL, sb.Org, sb.Project, key)
	}
	reads.Queue(admissionSQL, sb.Org, sb.Project, store.Timestamp(now))
	if more != nil {
		more(&reads)
	}
	tx, err = s.beginPipelined(ctx, &reads, func(br pgx.BatchResults) error {
		if generic {
			if _, err := br.Exec(); err != nil {
				return wrap(err)
			}
		}
		if key != "" {
			var err error
			if existing, err = readByKey(br.QueryRow()); err != nil {
				return err
			}
		}
		if err := scanAdmission(br.QueryRow(), a); err != nil {
			return err
		}
		if readMore != nil {
			return readMore(br)
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	if existing == nil && a.Quota.Limited() {
		existing, err = admitLimited(ctx, tx, sb, now, a)
	}
	if existing != nil || err != nil {
		tx.Rollback()
		return nil, existing, err
	}
	return tx, nil, nil
}

// admitLimited completes the admission of a create whose project's quota limits
// something (limitedAdmission, which locks the project) and then looks its
// idempotency key up again: a retry that waited for the lock behind the create it
// repeats finds that create's sandbox now (existing), and must get it back rather
// than be refused for the room that sandbox takes.
func admitLimited(ctx context.Context, tx txConn, sb store.Sandbox, now time.Time, a *store.Admission) (existing *store.Sandbox, err error) {
	if err := limitedAdmission(ctx, tx, sb.Org, sb.Project, store.Timestamp(now), a); err != nil {
		return nil, err
	}
	if sb.IdempotencyKey == "" {
		return nil, nil
	}
	return readByKey(tx.QueryRow(ctx, selectByKeySQL, sb.Org, sb.Project, sb.IdempotencyKey))
}

// insertSandboxSQL inserts a sandbox, or nothing when its idempotency key is taken.
const insertSandboxSQL = `INSERT INTO sandboxes (` + sandboxColumns + `) VALUES (` + sandboxParams + `)
	ON CONFLICT (org, project, idempotency_key) WHERE idempotency_key <> '' DO NOTHING
	RETURNING ` + sandboxColumns

// insertSandbox inserts a normalised sandbox, or returns the one holding its
// idempotency key (created=false).
func insertSandbox(ctx context.Context, tx pgx.Tx, sb store.Sandbox) (store.Sandbox, bool, error) {
	q, args, err := insertArgs(sb, insertSandboxSQL, insertSandboxEventsSQL)
	if err != nil {
		return store.Sandbox{}, false, err
	}
	row := tx.QueryRow(ctx, q, args...)
	out, err := scanSandbox(row)
	if err == nil || sb.IdempotencyKey == "" {
		return out, true, translate(err, "sandbox", sb.ID)
	}
	if !isNoRows(err) {
		return out, false, wrap(err)
	}
	out, err = scanSandbox(tx.QueryRow(ctx, selectByKeySQL, sb.Org, sb.Project, sb.IdempotencyKey))
	return out, false, translate(err, "sandbox", sb.ID)
}

// GetSandbox implements store.Store.
// Concurrent reads share a statement (reads.go).
func (s *Store) GetSandbox(ctx context.Context, id string) (store.Sandbox, error) {
	return s.reads.get(ctx, id)
}

// ListSandboxes implements store.Store; the label filter is jsonb containment (@>), which
// the GIN index serves.
func (s *Store) ListSandboxes(ctx context.Context, f store.SandboxFilter) ([]store.Sandbox, string, error) {
	limit, after, err := store.PageStart(f.Limit, f.Cursor)
	if err != nil {
		return nil, "", err
	}
	q, args, err := sandboxQuery(f, after, limit+1)
	if err != nil {
		return nil, "", err
	}
	items, err := collectSandboxes(s.pool.Query(ctx, q, args...))
	if err != nil {
		return nil, "", err
	}
	items, next := store.Page(items, limit)
	return items, next, nil
}

// EachSandbox implements store.Store with one query, whose rows PostgreSQL sends
// while fn consumes them.
func (s *Store) EachSandbox(ctx context.Context, f store.SandboxFilter, fn func(store.Sandbox) error) error {
	q, args, err := sandboxQuery(f, "", 0)
	if err != nil {
		return err
	}
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return wrap(err)
	}
	defer rows.Close()
	for rows.Next() {
		sb, err := scanSandbox(rows)
		if err != nil {
			return wrap(err)
		}
		if err := fn(sb); err != nil {
			return err
		}
	}
	return wrap(rows.Err())
}

// sandboxQuery selects the sandboxes f names (Limit and Cursor aside) with IDs
// above after, in ID order, limit of them (0: all).
func sandboxQuery(f store.SandboxFilter, after string, limit int) (string, []any, error) {
	var where []string
	var args []any
	add := func(cond string, v any) {
		args = append(args, v)
		where = append(where, fmt.Sprintf(cond, len(args)))
	}
	add("id > $%d", after)
	if f.Org != "" {
		add("org = $%d", f.Org)
	}
	if f.Project != "" {
		add("project = $%d", f.Project)
	}
	if f.Pool != "" {
		add("pool = $%d", f.Pool)
	}
	if len(f.States) > 0 {
		add("state = ANY($%d)", statesArg(f.States))
	}
	if f.ExpiresBy != nil {
		add("expires_at <= $%d", store.Timestamp(*f.ExpiresBy))
	}
	if len(f.Labels) > 0 {
		b, err := store.MarshalJSON(f.Labels)
		if err != nil {
			return "", nil, err
		}
		add("labels @> $%d::jsonb", b)
	}
	q := fmt.Sprintf(`SELECT %s FROM sandboxes WHERE %s ORDER BY id`, sandboxColumns, strings.Join(where, " AND "))
	if limit > 0 {
		args = append(args, limit)
		q += fmt.Sprintf(" LIMIT $%d", len(args))
	}
	return q, args, nil
}

func statesArg(states []store.State) []string {
	out := make([]string, len(states))
	for i, st := range states {
		out[i] = string(st)
	}
	return out
}

// updateSandboxesSQL writes many sandboxes in one statement, every column but
// created_at, request_hash and init_commands, which never change, from arrays with a row's values
// at each index ($1 the IDs): one plan and one executor for a whole batch where a
// statement per row pays for its own. Only the IDs are unnested; the other arrays
// are read by subscript, since an unnest of n arrays is n function scans, each
// materialised in a tuplestore of its own (see eventsInsert). It returns nothing:
// every column it writes comes from the row UpdateSandboxes computed, under the
// locks its SELECT took, and the unchanged ones from that SELECT, so the rows as
// written are known without sending them back.
//
// Each row is found by a lateral lookup of its ID, then fetched by the ctid that
// gives (a TID scan), rather than by joining the IDs to the table: on a young
// table that join is planned as a hash join over a scan of every row, and a
// connection keeps the plan until the table is analyzed (see lockSandboxesSQL).
// The lookup sees the version the transaction's SELECT locked, which no one else
// can write meanwhile.
var updateSandboxesSQL = updateSandboxesWhere(" LIMIT 1")

// updateSandboxesWhere is updateSandboxesSQL with lookup ending the lookup of each
// row by ID: further conditions, a limit, a locking clause.
func updateSandboxesWhere(lookup string) string {
	return `UPDATE sandboxes AS s SET ` + subscripted("v.i", 2, []string{
		"org text", "project text", "state text", "pool text", "region text", "backend_ref text",
		"template text", "profile text", "capabilities text:jsonb", "cpu float8", "memory_mib int8",
		"disk_gib int8", "labels text:jsonb", "env text:jsonb", "ttl_seconds int8",
		"expires_at timestamptz", "from_snapshot text", "placement text:jsonb", "attempts int4",
		"reason text", "next_attempt_at timestamptz", "claimed_by text", "claim_expires_at timestamptz",
		"idempotency_key text", "updated_at timestamptz", "state_changed_at timestamptz", "version int8",
		"avoid_pool text", "avoid_until timestamptz"}) + `
	FROM unnest($1::text[]) WITH ORDINALITY AS v(id, i)
		CROSS JOIN LATERAL (SELECT ctid AS t FROM sandboxes WHERE id = v.id` + lookup + `) x
	WHERE s.ctid = x.t`
}

// subscripted returns "column = ($n::type[])[index]" for each "column type" of
// columns, numbering parameters from first; "column type:cast" casts the element.
func subscripted(index string, first int, columns []string) string {
	out := make([]string, len(columns))
	for i, c := range columns {
		name, typ, _ := strings.Cut(c, " ")
		typ, cast, _ := strings.Cut(typ, ":")
		out[i] = fmt.Sprintf("%s = ($%d::%s[])[%s]", name, first+i, typ, index)
		if cast != "" {
			out[i] += "::" + cast
		}
	}
	return strings.Join(out, ", ")
}

// qualified prefixes every column of a comma-separated list with table.
func qualified(table, columns string) string {
	var out []string
	for c := range strings.SplitSeq(columns, ",") {
		out = append(out, table+"."+strings.TrimSpace(c))
	}
	return strings.Join(out, ", ")
}

// updateColumns holds a batch update's values column by column, in the order of
// updateSandboxesSQL's arrays.
type updateColumns struct {
	id, org, project, state, pool, region, backendRef, template, profile, capabilities []string
	cpu                                                                                []float64
	memoryMiB, diskGiB                                                                 []int64
	labels, env                                                                        []string
	ttlSeconds                                                                         []int64
	expiresAt                                                                          []*time.Time
	fromSnapshot, placement                                                            []string
	attempts                                                                           []int32
	reason                                                                             []string
	nextAttemptAt                                                                      []time.Time
	claimedBy                                                                          []string
	claimExpiresAt                                                                     []*time.Time
	idempotencyKey                                                                     []string
	updatedAt, stateChangedAt                                                          []time.Time
	version                                                                            []int64
	avoidPool                                                                          []string
	avoidUntil                                                                         []*time.Time
}

// add appends sb's values; nothing is appended when one of its JSON values fails to
// encode.
func (c *updateColumns) add(sb store.Sandbox) error {
	var js [4]string
	for i, v := range []any{sb.Capabilities, sb.Labels, sb.Env, sb.Placement} {
		b, err := store.MarshalJSON(v)
		if err != nil {
			return err
		}
		js[i] = string(b)
	}
	c.id = append(c.id, sb.ID)
	c.org = append(c.org, sb.Org)
	c.project = append(c.project, sb.Project)
	c.state = append(c.state, string(sb.State))
	c.pool = append(c.pool, sb.Pool)
	c.region = append(c.region, sb.Region)
	c.backendRef = append(c.backendRef, sb.BackendRef)
	c.template = append(c.template, sb.Template)
	c.profile = append(c.profile, sb.Profile)
	c.capabilities = append(c.capabilities, js[0])
	c.cpu = append(c.cpu, sb.Resources.CPU)
	c.memoryMiB = append(c.memoryMiB, sb.Resources.MemoryMiB)
	c.diskGiB = append(c.diskGiB, sb.Resources.DiskGiB)
	c.labels = append(c.labels, js[1])
	c.env = append(c.env, js[2])
	c.ttlSeconds = append(c.ttlSeconds, sb.TTLSeconds)
	c.expiresAt = append(c.expiresAt, sb.ExpiresAt)
	c.fromSnapshot = append(c.fromSnapshot, sb.FromSnapshot)
	c.placement = append(c.placement, js[3])
	c.attempts = append(c.attempts, int32(sb.Attempts))
	c.reason = append(c.reason, sb.Reason)
	c.nextAttemptAt = append(c.nextAttemptAt, sb.NextAttemptAt)
	c.claimedBy = append(c.claimedBy, sb.ClaimedBy)
	c.claimExpiresAt = append(c.claimExpiresAt, sb.ClaimExpiresAt)
	c.idempotencyKey = append(c.idempotencyKey, sb.IdempotencyKey)
	c.updatedAt = append(c.updatedAt, sb.UpdatedAt)
	c.stateChangedAt = append(c.stateChangedAt, sb.StateChangedAt)
	c.version = append(c.version, sb.Version)
	c.avoidPool = append(c.avoidPool, sb.AvoidPool)
	c.avoidUntil = append(c.avoidUntil, sb.AvoidUntil)
	return nil
}

func (c *updateColumns) args() []any {
	return []any{c.id, c.org, c.project, c.state, c.pool, c.region, c.backendRef, c.template,
		c.profile, c.capabilities, c.cpu, c.memoryMiB, c.diskGiB, c.labels, c.env, c.ttlSeconds,
		c.expiresAt, c.fromSnapshot, c.placement, c.attempts, c.reason, c.nextAttemptAt,
		c.claimedBy, c.claimExpiresAt, c.idempotencyKey, c.updatedAt, c.stateChangedAt, c.version,
		c.avoidPool, c.avoidUntil}
}

// batchWrite is what one batch update statement carries: its rows' columns and the
// events they append.
type batchWrite struct {
	cols   updateColumns
	events eventArrays
}

// add applies fn to cur as UpdateSandbox does and appends the result and its
// events, or nothing when fn refuses or a value fails to encode. It returns the row
// as the statement writes it, and as a read returns it.
func (w *batchWrite) add(cur store.Sandbox, now time.Time, fn func(*store.Sandbox) error) (store.Sandbox, error) {
	next, err := store.ApplyUpdate(cur, now, fn)
	if err != nil {
		return store.Sandbox{}, err
	}
	n := w.events.len()
	if err := w.events.add(store.PendingEvents(next, now)); err != nil {
		return store.Sandbox{}, err
	}
	if err := w.cols.add(next); err != nil {
		w.events.truncate(n)
		return store.Sandbox{}, err
	}
	return asRead(next), nil
}

// UpdateSandbox implements store.Store as a batch of one: SELECT ... FOR UPDATE, so
// that concurrent updates of one sandbox queue on the row lock and none is lost.
func (s *Store) UpdateSandbox(ctx context.Context, id string, now time.Time, fn func(*store.Sandbox) error) (store.Sandbox, error) {
	out, errs, err := s.UpdateSandboxes(ctx, []string{id}, now, func(_ int, sb *store.Sandbox) error { return fn(sb) })
	if err != nil {
		return store.Sandbox{}, err
	}
	if errs[0] != nil {
		return store.Sandbox{}, errs[0]
	}
	return out[0], nil
}

// genericPlansSQL makes a batch update's transaction run its statements on their
// generic plans, which lockSandboxesSQL and updateSandboxesSQL are written to make
// good whatever the table's statistics. PostgreSQL would otherwise plan them afresh
// on every run whose batch is smaller than the ten rows a generic plan assumes, and
// planning the update, with its events, costs more than writing the rows
// (TestStatementsKeepGenericPlans). It ends with the transaction. plan_cache_mode
// is PostgreSQL 12's; migration 010 already needs 13 (pg_current_xact_id).
const genericPlansSQL = `SET LOCAL plan_cache_mode = force_generic_plan`

// lockSandboxesSQL reads and locks the sandboxes of a batch ($1, sorted by ID: the
// lock order), one index lookup each. The obvious id = ANY($1) ... FOR UPDATE is
// planned as a scan of the whole table while the table is young: a connection
// keeps the plan it made then (its generic plan) until the table is analyzed, and
// every batch on it read every row. A lateral subquery per ID is planned as a
// lookup in the primary key whatever the statistics say.
var lockSandboxesSQL = `SELECT ` + prefixed("s.", sandboxColumns) + ` FROM unnest($1::text[]) AS v(id)
	CROSS JOIN LATERAL (SELECT ` + sandboxColumns + ` FROM sandboxes WHERE id = v.id FOR UPDATE) s`

// UpdateSandboxes implements store.Store in two round trips whatever the batch size:
// BEGIN with one SELECT ... FOR UPDATE of every row (ordered by id, the lock order),
// then the UPDATEs with COMMIT (pipelinedTx).
func (s *Store) UpdateSandboxes(ctx context.Context, ids []string, now time.Time, fn func(int, *store.Sandbox) error) ([]store.Sandbox, []error, error) {
	out := make([]store.Sandbox, len(ids))
	before := make([]store.Sandbox, len(ids))
	errs := make([]error, len(ids))
	if len(ids) == 0 {
		return out, errs, nil
	}
	index, err := store.BatchIndex(ids)
	if err != nil {
		return nil, nil, err
	}
	var rows []store.Sandbox
	var reads pgx.Batch
	reads.Queue(genericPlansSQL)
	reads.Queue(lockSandboxesSQL, slices.Sorted(slices.Values(ids)))
	tx, err := s.beginPipelined(ctx, &reads, func(br pgx.BatchResults) error {
		if _, err := br.Exec(); err != nil {
			return wrap(err)
		}
		q, err := br.Query()
		rows, err = collectSandboxesCap(q, err, len(ids))
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	defer tx.Rollback() // after a panic; a no-op once the transaction ended
	found := make([]bool, len(ids))
	var w batchWrite
	for _, cur := range rows {
		i := index[cur.ID]
		found[i], before[i] = true, cur
		row, err := w.add(cur, now, func(sb *store.Sandbox) error { return fn(i, sb) })
		if err != nil {
			errs[i] = err
			continue
		}
		out[i] = row
	}
	for i, ok := range found {
		if !ok {
			errs[i] = store.NotFound("sandbox", ids[i])
		}
	}
	if len(w.cols.id) == 0 {
		tx.Rollback()
		return out, errs, nil
	}
	// The events of the rows written are appended by the statement that writes
	// the rows, whose snapshot is taken after their locks were granted (see
	// migration 010 on why that matters).
	var writes pgx.Batch
	if w.events.len() > 0 {
		writes.Queue(updateSandboxesEventsSQL, append(w.cols.args(), w.events.args()...)...)
	} else {
		writes.Queue(updateSandboxesSQL, w.cols.args()...)
	}
	err = tx.Commit(&writes, func(br pgx.BatchResults) error {
		tag, err := br.Exec()
		if err != nil {
			return wrap(err)
		}
		if n := tag.RowsAffected(); n != int64(len(w.cols.id)) {
			return wrap(fmt.Errorf("a batch update of %d locked sandboxes wrote %d", len(w.cols.id), n))
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	for i := range ids {
		if errs[i] == nil {
			s.notify.written(before[i], out[i])
		}
	}
	return out, errs, nil
}

// updateKnownSandboxesSQL is updateSandboxesEventsSQL for rows the writer holds as
// last written: a row is written only where its version and claim (and creation
// time, should a warm claim have put a new row under its ID) are still the known
// ones ($31-$34), and events are appended ($35 on) only for the rows written, which
// it returns. It sends no row back for the writer to change first, so the whole
// write is one statement; a row changed meanwhile is left for UpdateSandboxes. Its IDs come sorted, the order lockSandboxesSQL locks in, so that
// it and a locking batch cannot deadlock.
//
// The lookup by ID checks the version and claim, and locks the row it finds
// (FOR UPDATE, as lockSandboxesSQL does): when another transaction holds the row,
// the lookup waits, and once that commits checks its conditions again on the
// version committed, returning that version's ctid or nothing. The conditions are
// the lookup's rather than the UPDATE's own: a TID scan's recheck after such a
// wait skipped its ctid until PostgreSQL's 2025 releases, and a condition between
// the table and the arrays lets the planner join them first, scanning the whole
// table on every write (TestKnownWriteAfterAWait, TestBatchesUseThePrimaryKey).
var updateKnownSandboxesSQL = `WITH up AS (` + updateSandboxesWhere(`
			AND version = ($31::int8[])[v.i] AND claimed_by = ($32::text[])[v.i]
			AND claim_expires_at IS NOT DISTINCT FROM ($33::timestamptz[])[v.i]
			AND created_at = ($34::timestamptz[])[v.i]
			FOR UPDATE`) + `
	RETURNING s.id),
	ev AS (` + eventsInsert(updateColumnCount+5, `e.first IN (SELECT id FROM up)`) + `)
	SELECT id FROM up`

// knownColumns are the stored values updateKnownSandboxesSQL checks, in the order of
// its arrays.
type knownColumns struct {
	version        []int64
	claimedBy      []string
	claimExpiresAt []*time.Time
	createdAt      []time.Time
}

func (k *knownColumns) add(sb store.Sandbox) {
	k.version = append(k.version, sb.Version)
	k.claimedBy = append(k.claimedBy, sb.ClaimedBy)
	k.claimExpiresAt = append(k.claimExpiresAt, sb.ClaimExpiresAt)
	k.createdAt = append(k.createdAt, sb.CreatedAt)
}

func (k *knownColumns) args() []any {
	return []any{k.version, k.claimedBy, k.claimExpiresAt, k.createdAt}
}

// UpdateKnownSandboxes implements store.Store. The known rows that fn accepts are
// written by one statement sent with BEGIN and COMMIT, a single round trip where
// UpdateSandboxes takes two, and the SELECT's rows are neither sent nor decoded. What
// that statement did not write (changed meanwhile, gone, or refused by fn as known:
// the stored row may differ) goes through UpdateSandboxes, fn running again on the
// stored value. Both stages commit apart: when the second fails after the first
// wrote, its rows' errs hold the failure and err stays nil, since some rows were
// written.
func (s *Store) UpdateKnownSandboxes(ctx context.Context, known []store.Sandbox, now time.Time, fn func(int, *store.Sandbox) error) ([]store.Sandbox, []error, error) {
	out := make([]store.Sandbox, len(known))
	errs := make([]error, len(known))
	if len(known) == 0 {
		return out, errs, nil
	}
	index, err := store.BatchIndex(store.SandboxIDs(known))
	if err != nil {
		return nil, nil, err
	}
	// The statement's order: the lock order of lockSandboxesSQL.
	order := make([]int, len(known))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return strings.Compare(known[a].ID, known[b].ID) })
	var w batchWrite
	var expect knownColumns
	for _, i := range order {
		row, err := w.add(known[i], now, func(sb *store.Sandbox) error { return fn(i, sb) })
		if err != nil {
			continue // left for UpdateSandboxes: the stored row may not be known[i]
		}
		expect.add(known[i])
		out[i] = row
	}
	written := make([]bool, len(known))
	if len(w.cols.id) > 0 {
		var b pgx.Batch
		b.Queue(genericPlansSQL)
		args := append(append(w.cols.args(), expect.args()...), w.events.args()...)
		b.Queue(updateKnownSandboxesSQL, args...)
		err := s.inOneTrip(ctx, &b, func(br pgx.BatchResults) error {
			if _, err := br.Exec(); err != nil {
				return err
			}
			rows, err := br.Query()
			if err != nil {
				return err
			}
			ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
			for _, id := range ids {
				written[index[id]] = true
			}
			return err
		})
		if err != nil {
			return nil, nil, wrap(err)
		}
	}
	var rest []int
	for i := range known {
		if written[i] {
			s.notify.written(known[i], out[i])
		} else {
			rest = append(rest, i)
			out[i] = store.Sandbox{}
		}
	}
	if len(rest) == 0 {
		return out, errs, nil
	}
	s.knownReread.Add(int64(len(rest)))
	ids := make([]string, len(rest))
	for j, i := range rest {
		ids[j] = known[i].ID
	}
	more, moreErrs, err := s.UpdateSandboxes(ctx, ids, now, func(j int, sb *store.Sandbox) error { return fn(rest[j], sb) })
	for j, i := range rest {
		switch {
		case err != nil:
			errs[i] = err
		default:
			out[i], errs[i] = more[j], moreErrs[j]
		}
	}
	if err != nil && len(rest) == len(known) {
		return nil, nil, err
	}
	return out, errs, nil
}

// ClaimSandboxes implements store.Store. SKIP LOCKED lets concurrent claimers pass over
// rows another claimer is taking; a row claimed and committed meanwhile is re-checked
// against the WHERE clause by PostgreSQL and dropped, so no row is claimed twice.
func (s *Store) ClaimSandboxes(ctx context.Context, now time.Time, claimer string, lease time.Duration, limit int) ([]store.Sandbox, error) {
	if limit <= 0 {
		return nil, nil
	}
	now = store.Timestamp(now)
	rows, err := s.pool.Query(ctx, `WITH picked AS (
			SELECT id FROM sandboxes
			WHERE state = 'queued' AND next_attempt_at <= $1
			  AND (claim_expires_at IS NULL OR claim_expires_at <= $1)
			ORDER BY next_attempt_at, id
			LIMIT $2
			FOR UPDATE SKIP LOCKED)
		UPDATE sandboxes s SET claimed_by = $3, claim_expires_at = $4
		FROM picked WHERE s.id = picked.id
		RETURNING `+prefixed("s.", sandboxColumns), now, limit, claimer, store.Timestamp(now.Add(lease)))
	out, err := collectSandboxes(rows, err)
	if err != nil {
		return nil, err
	}
	// RETURNING has no order; restore the claim order.
	sort.Slice(out, func(i, j int) bool {
		if !out[i].NextAttemptAt.Equal(out[j].NextAttemptAt) {
			return out[i].NextAttemptAt.Before(out[j].NextAttemptAt)
		}
		return out[i].ID < out[j].ID
	})
	return out, nil
}

func prefixed(prefix, columns string) string {
	parts := strings.Split(columns, ",")
	for i, p := range parts {
		parts[i] = prefix + strings.TrimSpace(p)
	}
	return strings.Join(parts, ", ")
}

// CountSandboxesByPool implements store.Store.
func (s *Store) CountSandboxesByPool(ctx context.Context, states []store.State) (map[string]int, error) {
	return s.countBy(ctx, "pool", states)
}

// CountSandboxesByState implements store.Store.
func (s *Store) CountSandboxesByState(ctx context.Context, states []store.State) (map[store.State]int, error) {
	byName, err := s.countBy(ctx, "state", states)
	return store.KeyedByState(byName), err
}

// countBy counts the sandboxes in states grouped by column, a constant of this file.
func (s *Store) countBy(ctx context.Context, column string, states []store.State) (map[string]int, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+column+`, count(*) FROM sandboxes WHERE state = ANY($1) GROUP BY `+column, statesArg(states))
	if err != nil {
		return nil, wrap(err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var key string
		var n int
		if err := rows.Scan(&key, &n); err != nil {
			return nil, wrap(err)
		}
		out[key] = n
	}
	return out, wrap(rows.Err())
}

// warmReadyWhere picks the ready warm sandboxes of a shape's project ($1) on a pool
// ($2). The organisation and the state are constants, as in the predicate of the
// index sandboxes_warm_ready (migration 015), so that every plan, the generic one
// included, can use that index.
const warmReadyWhere = `WHERE org = '` + store.WarmOrg + `' AND state = 'running' AND project = $1 AND pool = $2`

// selectWarmSQL takes the ready warm sandbox that has waited longest, skipping those
// another transaction holds (a concurrent claim).
const selectWarmSQL = `SELECT ` + sandboxColumns + ` FROM sandboxes ` + warmReadyWhere + `
	ORDER BY state_changed_at, id LIMIT 1 FOR UPDATE SKIP LOCKED`

// selectWarmUnlimitedSQL is selectWarmSQL that takes nothing when the claiming
// tenant's project ($3, $4) has a quota: such a claim locks its project first
// (limitedAdmission) and only then a warm sandbox, so that no warm sandbox is held,
// and skipped by other tenants' claims, while it waits for that lock.
const selectWarmUnlimitedSQL = `SELECT ` + sandboxColumns + ` FROM sandboxes ` + warmReadyWhere + `
	AND NOT EXISTS (SELECT FROM projects p WHERE p.org = $3 AND p.name = $4
		AND (p.quota_sandboxes > 0 OR p.quota_cpu > 0 OR p.quota_memory_mib > 0 OR p.quota_disk_gib > 0))
	ORDER BY state_changed_at, id LIMIT 1 FOR UPDATE SKIP LOCKED`

// claimInsertSQL inserts the claiming sandbox. Unlike insertSandboxSQL it fails on
// a taken idempotency key instead of inserting nothing: it travels with COMMIT
// after the warm sandbox's DELETE, and only a failure keeps that COMMIT from
// removing the warm sandbox without putting the claim in its place.
const claimInsertSQL = `INSERT INTO sandboxes (` + sandboxColumns + `) VALUES (` + sandboxParams + `)
	RETURNING ` + sandboxColumns

var claimInsertEventsSQL = withEvents(claimInsertSQL, sandboxColumns)

// ClaimWarm implements store.Store, in two round trips when the tenant's project
// has no quota: BEGIN with the reads (the idempotency key, the admission, the warm
// sandbox, locked), then the warm sandbox's DELETE and the claim's INSERT with
// COMMIT.
func (s *Store) ClaimWarm(ctx context.Context, now time.Time, sb store.Sandbox, pool, project string,
	claim func(store.Admission, store.Sandbox, *store.Sandbox) error) (store.Sandbox, bool, error) {
	var (
		a     store.Admission
		warm  store.Sandbox
		found bool
	)
	// readWarm scans the row of a warm sandbox select: none is no error.
	readWarm := func(row pgx.Row) error {
		w, err := scanSandbox(row)
		switch {
		case err == nil:
			warm, found = w, true
		case !isNoRows(err):
			return wrap(err)
		}
		return nil
	}
	// A claim's statements are planned afresh on each of a connection's first five
	// runs otherwise, which costs as much as running them; their generic plans use
	// the indexes a custom plan would (TestClaimUsesIndexes).
	tx, existing, err := s.beginAdmission(ctx, sb, now, &a, true,
		func(b *pgx.Batch) { b.Queue(selectWarmUnlimitedSQL, project, pool, sb.Org, sb.Project) },
		func(br pgx.BatchResults) error { return readWarm(br.QueryRow()) })
	switch {
	case err != nil:
		return store.Sandbox{}, false, err
	case existing != nil:
		return *existing, false, nil
	}
	defer tx.Rollback() // on every return before Commit, and after a panic
	if !found && a.Quota.Limited() {
		// The first select skips a project with a quota (unless it was lifted in
		// between): such a claim takes its warm sandbox under the project's lock.
		if err := readWarm(tx.QueryRow(ctx, selectWarmSQL, project, pool)); err != nil {
			return store.Sandbox{}, false, err
		}
	}
	if !found {
		return store.Sandbox{}, false, store.ErrNoWarm
	}
	ins := sb
	err = claim(a, warm, &ins)
	var q string
	var args []any
	if err == nil {
		ins.ID = warm.ID
		ins, err = store.NormalizeSandbox(now, ins)
	}
	if err == nil {
		q, args, err = insertArgs(ins, claimInsertSQL, claimInsertEventsSQL)
	}
	if err != nil {
		return store.Sandbox{}, false, err
	}
	var writes pgx.Batch
	writes.Queue(deleteSandboxSQL, warm.ID)
	writes.Queue(q, args...)
	var out store.Sandbox
	err = tx.Commit(&writes, func(br pgx.BatchResults) error {
		if _, err := br.Exec(); err != nil {
			return wrap(err)
		}
		var err error
		out, err = scanSandbox(br.QueryRow())
		return err
	})
	if err != nil {
		if isUniqueViolation(err) && sb.IdempotencyKey != "" {
			// Only the idempotency key can be taken: the ID is the warm
			// sandbox's, deleted in the same transaction. Nothing is written.
			return store.Sandbox{}, false, store.Conflict("a concurrent create with the same Idempotency-Key won; retry to get its sandbox")
		}
		return store.Sandbox{}, false, translate(err, "sandbox", ins.ID)
	}
	s.notify.sandbox(out)
	return out, true, nil
}

// nonNilStrings stores a sandbox without init commands as [] rather than null, as
// the column's default does for the sandboxes stored before it.
func nonNilStrings(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
