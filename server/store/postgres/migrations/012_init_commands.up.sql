-- The commands a client runs in a sandbox once it is running (the Terraform
-- provider's init_commands), recorded with the create so that a client importing
-- the sandbox can read back what it was made with. The daemon never runs them.
-- Sandboxes stored before it have none.
ALTER TABLE sandboxes ADD COLUMN init_commands jsonb NOT NULL DEFAULT '[]';
