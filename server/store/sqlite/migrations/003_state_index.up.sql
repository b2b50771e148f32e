-- Counting and listing by state reads the live rows only, however many terminated
-- ones pile up (as on PostgreSQL).
CREATE INDEX sandboxes_state_pool ON sandboxes (state, pool);
