-- The creates each pool's warm shape matched, summed over the replicas
-- (store.WarmStats): hits, misses and a histogram of the claims' times as a JSON
-- array, one count per bound of store.WarmClaimBuckets and one for the slower ones.
-- A pool's rows go with it (DeletePool); shape is store.WarmShape.Key.
CREATE TABLE warm_stats (
    pool          TEXT NOT NULL,
    shape         TEXT NOT NULL,
    hits          INTEGER NOT NULL DEFAULT 0,
    misses        INTEGER NOT NULL DEFAULT 0,
    claim_counts  TEXT NOT NULL DEFAULT '[]',
    claim_seconds REAL NOT NULL DEFAULT 0,
    PRIMARY KEY (pool, shape)
) STRICT;
