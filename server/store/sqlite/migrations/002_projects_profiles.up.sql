-- Projects (declared to carry a quota; 0 = unlimited) and profiles (named bundles of
-- sandbox settings), as on PostgreSQL. Sandboxes name their project by (org, project)
-- without a foreign key: a project that was never declared exists implicitly, with no
-- quota.

CREATE TABLE projects (
    org              TEXT NOT NULL,
    name             TEXT NOT NULL,
    quota_sandboxes  INTEGER NOT NULL,
    quota_cpu        REAL NOT NULL,
    quota_memory_mib INTEGER NOT NULL,
    quota_disk_gib   INTEGER NOT NULL,
    created_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL,
    version          INTEGER NOT NULL,
    PRIMARY KEY (org, name)
) STRICT;

CREATE TABLE profiles (
    name         TEXT PRIMARY KEY,
    capabilities TEXT NOT NULL,
    cpu          REAL NOT NULL,
    memory_mib   INTEGER NOT NULL,
    disk_gib     INTEGER NOT NULL,
    template     TEXT NOT NULL,
    placement    TEXT NOT NULL,
    ttl_seconds  INTEGER NOT NULL,
    created_at   INTEGER NOT NULL,
    updated_at   INTEGER NOT NULL,
    version      INTEGER NOT NULL
) STRICT;

-- Quota usage sums a project's non-terminal sandboxes at every admission.
CREATE INDEX sandboxes_tenant_state ON sandboxes (org, project, state);
