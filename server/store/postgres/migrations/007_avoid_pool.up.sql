-- The pool that last answered insufficient_capacity for a sandbox, and until when
-- the scheduler ranks it last. Kept in the row so that the replica claiming the
-- sandbox next knows it, whichever replica saw the answer.
ALTER TABLE sandboxes
    ADD COLUMN avoid_pool text NOT NULL DEFAULT '',
    ADD COLUMN avoid_until timestamptz;
