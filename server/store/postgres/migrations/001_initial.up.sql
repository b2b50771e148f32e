-- The initial schema. JSON-valued fields are jsonb; resources are columns so that quota
-- sums stay plain SQL.

CREATE TABLE meta (
    key   text PRIMARY KEY,
    value text NOT NULL
);

CREATE TABLE pools (
    name                 text PRIMARY KEY,
    adapter              text NOT NULL,
    trust                text NOT NULL,
    region               text NOT NULL,
    max_concurrency      integer NOT NULL,
    max_starting         integer NOT NULL,
    cost_cpu_hour        double precision NOT NULL,
    cost_memory_gib_hour double precision NOT NULL,
    config               jsonb NOT NULL,
    credentials_env      text NOT NULL,
    features             jsonb NOT NULL,
    created_at           timestamptz NOT NULL,
    updated_at           timestamptz NOT NULL,
    version              bigint NOT NULL
);

CREATE TABLE sandboxes (
    id               text PRIMARY KEY,
    org              text NOT NULL,
    project          text NOT NULL,
    state            text NOT NULL,
    pool             text NOT NULL,
    region           text NOT NULL,
    backend_ref      text NOT NULL,
    template         text NOT NULL,
    profile          text NOT NULL,
    capabilities     jsonb NOT NULL,
    cpu              double precision NOT NULL,
    memory_mib       bigint NOT NULL,
    disk_gib         bigint NOT NULL,
    labels           jsonb NOT NULL,
    env              jsonb NOT NULL,
    ttl_seconds      bigint NOT NULL,
    expires_at       timestamptz,
    from_snapshot    text NOT NULL,
    placement        jsonb NOT NULL,
    attempts         integer NOT NULL,
    reason           text NOT NULL,
    next_attempt_at  timestamptz NOT NULL,
    claimed_by       text NOT NULL,
    claim_expires_at timestamptz,
    idempotency_key  text NOT NULL,
    created_at       timestamptz NOT NULL,
    updated_at       timestamptz NOT NULL,
    state_changed_at timestamptz NOT NULL,
    version          bigint NOT NULL
);

-- One sandbox per (project, Idempotency-Key); the partial predicate is repeated in the
-- ON CONFLICT clause of CreateSandbox.
CREATE UNIQUE INDEX sandboxes_idempotency ON sandboxes (project, idempotency_key)
    WHERE idempotency_key <> '';
-- The scheduler's claim query scans due queued sandboxes in this order.
CREATE INDEX sandboxes_claim ON sandboxes (next_attempt_at, id) WHERE state = 'queued';
CREATE INDEX sandboxes_project ON sandboxes (project, id);
CREATE INDEX sandboxes_pool_state ON sandboxes (pool, state);
CREATE INDEX sandboxes_labels ON sandboxes USING gin (labels jsonb_path_ops);

CREATE TABLE snapshots (
    id          text PRIMARY KEY,
    sandbox_id  text NOT NULL,
    org         text NOT NULL,
    project     text NOT NULL,
    pool        text NOT NULL,
    backend_ref text NOT NULL,
    kind        text NOT NULL,
    size_bytes  bigint NOT NULL,
    state       text NOT NULL,
    created_at  timestamptz NOT NULL
);
CREATE INDEX snapshots_sandbox ON snapshots (sandbox_id, id);

CREATE TABLE tokens (
    id           text PRIMARY KEY,
    hash         bytea NOT NULL UNIQUE,
    scope        text NOT NULL,
    org          text NOT NULL,
    project      text NOT NULL,
    name         text NOT NULL,
    created_at   timestamptz NOT NULL,
    last_used_at timestamptz
);

-- The global policy: one row, id 1.
CREATE TABLE policy (
    id  integer PRIMARY KEY CHECK (id = 1),
    doc jsonb NOT NULL
);

CREATE TABLE leases (
    name       text PRIMARY KEY,
    holder     text NOT NULL,
    expires_at timestamptz NOT NULL
);
