-- The kinds of sandbox a pool keeps started ahead of demand: a JSON array of
-- store.WarmShape, empty for none.
ALTER TABLE pools ADD COLUMN warm jsonb NOT NULL DEFAULT '[]';
