-- An Idempotency-Key is unique within a project, and a project is its organisation
-- and its name: two organisations' projects of one name must neither share keys nor
-- learn of each other's.
DROP INDEX sandboxes_idempotency;
CREATE UNIQUE INDEX sandboxes_idempotency ON sandboxes (org, project, idempotency_key)
    WHERE idempotency_key <> '';
