-- The initial schema, the same as PostgreSQL's: JSON-valued fields are TEXT, times are
-- INTEGER Unix microseconds (UTC), tables are STRICT so a wrongly typed value is an error.

CREATE TABLE meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
) STRICT;

CREATE TABLE pools (
    name                 TEXT PRIMARY KEY,
    adapter              TEXT NOT NULL,
    trust                TEXT NOT NULL,
    region               TEXT NOT NULL,
    max_concurrency      INTEGER NOT NULL,
    max_starting         INTEGER NOT NULL,
    cost_cpu_hour        REAL NOT NULL,
    cost_memory_gib_hour REAL NOT NULL,
    config               TEXT NOT NULL,
    credentials_env      TEXT NOT NULL,
    features             TEXT NOT NULL,
    created_at           INTEGER NOT NULL,
    updated_at           INTEGER NOT NULL,
    version              INTEGER NOT NULL
) STRICT;

CREATE TABLE sandboxes (
    id               TEXT PRIMARY KEY,
    org              TEXT NOT NULL,
    project          TEXT NOT NULL,
    state            TEXT NOT NULL,
    pool             TEXT NOT NULL,
    region           TEXT NOT NULL,
    backend_ref      TEXT NOT NULL,
    template         TEXT NOT NULL,
    profile          TEXT NOT NULL,
    capabilities     TEXT NOT NULL,
    cpu              REAL NOT NULL,
    memory_mib       INTEGER NOT NULL,
    disk_gib         INTEGER NOT NULL,
    labels           TEXT NOT NULL,
    env              TEXT NOT NULL,
    ttl_seconds      INTEGER NOT NULL,
    expires_at       INTEGER,
    from_snapshot    TEXT NOT NULL,
    placement        TEXT NOT NULL,
    attempts         INTEGER NOT NULL,
    reason           TEXT NOT NULL,
    next_attempt_at  INTEGER NOT NULL,
    claimed_by       TEXT NOT NULL,
    claim_expires_at INTEGER,
    idempotency_key  TEXT NOT NULL,
    created_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL,
    state_changed_at INTEGER NOT NULL,
    version          INTEGER NOT NULL
) STRICT;

-- One sandbox per (project, Idempotency-Key); the partial predicate is repeated in the
-- lookup of CreateSandbox.
CREATE UNIQUE INDEX sandboxes_idempotency ON sandboxes (project, idempotency_key)
    WHERE idempotency_key <> '';
-- The scheduler's claim query scans due queued sandboxes in this order.
CREATE INDEX sandboxes_claim ON sandboxes (next_attempt_at, id) WHERE state = 'queued';
CREATE INDEX sandboxes_project ON sandboxes (project, id);
CREATE INDEX sandboxes_pool_state ON sandboxes (pool, state);

CREATE TABLE snapshots (
    id          TEXT PRIMARY KEY,
    sandbox_id  TEXT NOT NULL,
    org         TEXT NOT NULL,
    project     TEXT NOT NULL,
    pool        TEXT NOT NULL,
    backend_ref TEXT NOT NULL,
    kind        TEXT NOT NULL,
    size_bytes  INTEGER NOT NULL,
    state       TEXT NOT NULL,
    created_at  INTEGER NOT NULL
) STRICT;
CREATE INDEX snapshots_sandbox ON snapshots (sandbox_id, id);

CREATE TABLE tokens (
    id           TEXT PRIMARY KEY,
    hash         BLOB NOT NULL UNIQUE,
    scope        TEXT NOT NULL,
    org          TEXT NOT NULL,
    project      TEXT NOT NULL,
    name         TEXT NOT NULL,
    created_at   INTEGER NOT NULL,
    last_used_at INTEGER
) STRICT;

-- The global policy: one row, id 1.
CREATE TABLE policy (
    id  INTEGER PRIMARY KEY CHECK (id = 1),
    doc TEXT NOT NULL
) STRICT;

CREATE TABLE leases (
    name       TEXT PRIMARY KEY,
    holder     TEXT NOT NULL,
    expires_at INTEGER NOT NULL
) STRICT;
