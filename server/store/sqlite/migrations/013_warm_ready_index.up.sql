-- The ready warm sandboxes of each shape (the warm pseudo-tenant's project) on each
-- pool, in the order a claim takes them: the one that has waited longest first.
-- ClaimWarm names the organisation and the state as constants, as this predicate
-- does, so that SQLite can use it rather than walk every running sandbox of the pool.
CREATE INDEX sandboxes_warm_ready ON sandboxes (project, pool, state_changed_at, id)
    WHERE org = '_warm' AND state = 'running';
