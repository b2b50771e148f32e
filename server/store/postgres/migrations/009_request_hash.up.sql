-- The hash of the create request that made a sandbox, kept with its Idempotency-Key
-- so that a create repeating a key with another request is refused rather than
-- answered with the first request's sandbox. Sandboxes stored before it have '',
-- which any request matches.
ALTER TABLE sandboxes ADD COLUMN request_hash text NOT NULL DEFAULT '';
