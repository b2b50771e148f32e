-- Where a pool is defined: 'config' for a pool of the daemon's config file, which the
-- API may not change, 'api' for one created through the API. Pools stored before this
-- column are the API's until the next start, which takes over those its config file
-- names (every start writes the file's pools).
ALTER TABLE pools ADD COLUMN source text NOT NULL DEFAULT 'api'
    CHECK (source IN ('config', 'api'));
