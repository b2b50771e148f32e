-- The sandboxes' events (store.Event), appended in the transaction that writes the
-- change each records, and listed by ListEvents (server/store/postgres/events.go).
--
-- seq orders the events of one sandbox: every write that appends to a sandbox holds
-- its row's lock (or inserts the row), so its events take their seq after those of
-- the write before, which has committed.
--
-- txid orders the whole table for followers. A row is listed only once txid is
-- below the oldest transaction still running (pg_snapshot_xmin of the listing's
-- snapshot), so a row that commits after a cursor was handed out always sorts after
-- that cursor. It is the inserting transaction's ID, raised to the xmax of the
-- INSERT's snapshot (one past the newest transaction ended by then): any value at
-- least the transaction's own ID keeps that rule, and the raise makes a write that
-- waited for another's row lock sort after it even when it took its own ID first
-- (it locked another row before), so the events of one sandbox come in seq order in
-- every listing.
--
-- seq has no index of its own: every read goes through one of the two below, and
-- each index costs every append (PruneEvents deletes by ctid).
CREATE TABLE sandbox_events (
    seq         bigint GENERATED ALWAYS AS IDENTITY,
    txid        xid8 NOT NULL DEFAULT greatest(pg_current_xact_id(), pg_snapshot_xmax(pg_current_snapshot())),
    sandbox_id  text NOT NULL,
    org         text NOT NULL,
    project     text NOT NULL,
    at          timestamptz NOT NULL,
    type        text NOT NULL,
    from_state  text NOT NULL,
    to_state    text NOT NULL,
    actor       text NOT NULL,
    pool        text NOT NULL,
    attempt     integer NOT NULL,
    code        text NOT NULL,
    message     text NOT NULL,
    duration_ms bigint NOT NULL,
    -- A JSON array of store.Candidate, '' when there are none.
    candidates  text NOT NULL
);

-- One sandbox's events in order, and the per-sandbox bound of PruneEvents.
CREATE INDEX sandbox_events_sandbox ON sandbox_events (sandbox_id, seq);
-- The follow of every event (or of a tenant's, filtered) in (txid, seq) order.
CREATE INDEX sandbox_events_follow ON sandbox_events (txid, seq);
-- The events that made a sandbox terminal: PruneEvents finds the sandboxes whose
-- events have outlived AfterTerminal through them without reading the others.
CREATE INDEX sandbox_events_terminal ON sandbox_events (at) WHERE to_state IN ('terminated', 'failed');
