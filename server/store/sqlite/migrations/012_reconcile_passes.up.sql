-- The reconcile passes (store.ReconcilePass) this database's replica ran, periodic
-- and asked for, listed newest first by ListReconcilePasses. RecordReconcilePass
-- keeps only the newest scheduler.reconcilePassesKept rows; AUTOINCREMENT keeps an
-- id from being used again once they are pruned, so that a cursor never skips a pass.
CREATE TABLE reconcile_passes (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    started_at  INTEGER NOT NULL,
    ended_at    INTEGER NOT NULL,
    replica     TEXT NOT NULL,
    trigger     TEXT NOT NULL,
    token_id    TEXT NOT NULL,
    error       TEXT NOT NULL,
    -- A JSON array of store.ReconcilePoolReport.
    pools       TEXT NOT NULL
) STRICT;
