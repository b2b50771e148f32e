-- The ready warm sandboxes of each shape (the warm pseudo-tenant's project) on each
-- pool, in the order a claim takes them: the one that has waited longest first. The
-- claim's statement names the organisation and the state as constants so that its
-- generic plan, made before the table has statistics, can use this index; without
-- it that plan may walk every running sandbox of the pool.
CREATE INDEX sandboxes_warm_ready ON sandboxes (project, pool, state_changed_at, id)
    WHERE org = '_warm' AND state = 'running';
