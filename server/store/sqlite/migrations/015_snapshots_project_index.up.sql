-- A project's snapshots in ID order, for the listing of every snapshot a project
-- token may see (GET /v1/snapshots) without reading the other projects'.
CREATE INDEX snapshots_project ON snapshots (org, project, id);
