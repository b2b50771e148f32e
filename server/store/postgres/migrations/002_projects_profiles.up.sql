-- Projects (declared to carry a quota; 0 = unlimited) and profiles (named bundles of
-- sandbox settings). Sandboxes name their project by (org, project) without a foreign
-- key: a project that was never declared exists implicitly, with no quota.

CREATE TABLE projects (
    org              text NOT NULL,
    name             text NOT NULL,
    quota_sandboxes  integer NOT NULL,
    quota_cpu        double precision NOT NULL,
    quota_memory_mib bigint NOT NULL,
    quota_disk_gib   bigint NOT NULL,
    created_at       timestamptz NOT NULL,
    updated_at       timestamptz NOT NULL,
    version          bigint NOT NULL,
    PRIMARY KEY (org, name)
);

CREATE TABLE profiles (
    name         text PRIMARY KEY,
    capabilities jsonb NOT NULL,
    cpu          double precision NOT NULL,
    memory_mib   bigint NOT NULL,
    disk_gib     bigint NOT NULL,
    template     text NOT NULL,
    placement    jsonb NOT NULL,
    ttl_seconds  bigint NOT NULL,
    created_at   timestamptz NOT NULL,
    updated_at   timestamptz NOT NULL,
    version      bigint NOT NULL
);

-- Quota usage sums a project's non-terminal sandboxes at every admission.
CREATE INDEX sandboxes_tenant_state ON sandboxes (org, project, state);
