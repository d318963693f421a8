-- The workloads' output, as the agents send it: one row per line, stored once however often a line
-- arrives (the agent resends what was not acknowledged). Kept: the last 10,000 lines and at most
-- 4 MiB of text per rental (trimmed as lines come), and deleted 7 days after the rental ended.
CREATE TABLE IF NOT EXISTS rental_logs (
  rental_id VARCHAR(64) NOT NULL,
  seq BIGINT NOT NULL,
  at TIMESTAMPTZ NOT NULL,
  stream VARCHAR(8) NOT NULL,
  text TEXT NOT NULL,
  PRIMARY KEY (rental_id, seq)
);
-- The retention sweep finds ended rentals by when they ended.
CREATE INDEX IF NOT EXISTS rentals_ended_at_idx ON rentals (ended_at) WHERE ended_at IS NOT NULL;
