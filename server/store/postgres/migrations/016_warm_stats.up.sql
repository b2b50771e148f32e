-- The creates each pool's warm shape matched, summed over the replicas
-- (store.WarmStats): hits, misses and a histogram of the claims' times, one count
-- per bound of store.WarmClaimBuckets and one for the slower ones. A pool's rows go
-- with it (DeletePool); shape is store.WarmShape.Key.
CREATE TABLE warm_stats (
    pool          text NOT NULL,
    shape         text NOT NULL,
    hits          bigint NOT NULL DEFAULT 0,
    misses        bigint NOT NULL DEFAULT 0,
    claim_counts  bigint[] NOT NULL DEFAULT '{}',
    claim_seconds double precision NOT NULL DEFAULT 0,
    PRIMARY KEY (pool, shape)
);
