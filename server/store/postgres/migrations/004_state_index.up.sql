-- Counting and listing by state (the scheduler's per-pool counts, its listings of
-- terminating and expirable sandboxes) reads the live rows only, however many
-- terminated ones pile up.
CREATE INDEX sandboxes_state_pool ON sandboxes (state, pool);

-- Expiry reads only the sandboxes whose TTL has run out.
CREATE INDEX sandboxes_expiry ON sandboxes (expires_at)
    WHERE expires_at IS NOT NULL AND state IN ('queued', 'running', 'stopped', 'paused');
