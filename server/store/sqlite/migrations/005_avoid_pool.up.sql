-- The pool that last answered insufficient_capacity for a sandbox, and until when
-- (microseconds since the epoch) the scheduler ranks it last. Kept in the row so
-- that the replica claiming the sandbox next knows it.
ALTER TABLE sandboxes ADD COLUMN avoid_pool TEXT NOT NULL DEFAULT '';
ALTER TABLE sandboxes ADD COLUMN avoid_until INTEGER;
