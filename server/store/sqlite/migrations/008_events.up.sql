-- The sandboxes' events (store.Event), appended in the transaction that writes the
-- change each records, and listed by ListEvents in seq order. SQLite has one writer,
-- so seq order is commit order. AUTOINCREMENT keeps a seq from being used again once
-- the newest rows are pruned, which would put new events behind a follower's cursor.
CREATE TABLE sandbox_events (
    seq         INTEGER PRIMARY KEY AUTOINCREMENT,
    sandbox_id  TEXT NOT NULL,
    org         TEXT NOT NULL,
    project     TEXT NOT NULL,
    at          INTEGER NOT NULL,
    type        TEXT NOT NULL,
    from_state  TEXT NOT NULL,
    to_state    TEXT NOT NULL,
    actor       TEXT NOT NULL,
    pool        TEXT NOT NULL,
    attempt     INTEGER NOT NULL,
    code        TEXT NOT NULL,
    message     TEXT NOT NULL,
    duration_ms INTEGER NOT NULL,
    -- A JSON array of store.Candidate, '' when there are none.
    candidates  TEXT NOT NULL
) STRICT;

-- One sandbox's events in order, and the per-sandbox bound of PruneEvents.
CREATE INDEX sandbox_events_sandbox ON sandbox_events (sandbox_id, seq);
-- The events that made a sandbox terminal: PruneEvents finds the sandboxes whose
-- events have outlived AfterTerminal through them without reading the others.
CREATE INDEX sandbox_events_terminal ON sandbox_events (at) WHERE to_state IN ('terminated', 'failed');
