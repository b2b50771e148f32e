-- The reconcile passes (store.ReconcilePass) the replicas ran, the leader's periodic
-- ones and those asked for, listed newest first by ListReconcilePasses. Passes never
-- overlap (the reconcile-pass lease), so id order is the order they ran in.
-- RecordReconcilePass keeps only the newest scheduler.reconcilePassesKept rows.
CREATE TABLE reconcile_passes (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    started_at  timestamptz NOT NULL,
    ended_at    timestamptz NOT NULL,
    replica     text NOT NULL,
    trigger     text NOT NULL,
    token_id    text NOT NULL,
    error       text NOT NULL,
    -- A JSON array of store.ReconcilePoolReport.
    pools       text NOT NULL
);
