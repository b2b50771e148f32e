-- When a token stops being accepted (a short-lived token, such as one a CI job mints
-- through Terraform's ephemeral differently_project_token); NULL: never. Tokens
-- stored before it never expire.
ALTER TABLE tokens ADD COLUMN expires_at timestamptz;
