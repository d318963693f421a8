-- Read side of payout runs, written by the payout-run projection: the operator's list of runs and the
-- unfinished runs each node wakes after a node loss. The PayoutRun entity stays the authority (a run's
-- detail and its exports are read from it).
CREATE TABLE IF NOT EXISTS payout_runs (
  run_id VARCHAR(128) PRIMARY KEY,
  status VARCHAR(16) NOT NULL,         -- deciding, paying, completed
  minimum BIGINT NOT NULL,             -- µ€
  decided_total BIGINT NOT NULL DEFAULT 0,
  decided_count INTEGER NOT NULL DEFAULT 0,
  paid_total BIGINT NOT NULL DEFAULT 0,
  paid_count INTEGER NOT NULL DEFAULT 0,
  refused_total BIGINT NOT NULL DEFAULT 0,
  refused_count INTEGER NOT NULL DEFAULT 0,
  skipped_count INTEGER NOT NULL DEFAULT 0,
  created_at TIMESTAMPTZ NOT NULL,
  decided_at TIMESTAMPTZ,
  completed_at TIMESTAMPTZ,
  updated_at TIMESTAMPTZ NOT NULL
);
CREATE INDEX IF NOT EXISTS payout_runs_created_idx ON payout_runs (created_at DESC, run_id);
CREATE INDEX IF NOT EXISTS payout_runs_unfinished_idx ON payout_runs (status) WHERE status <> 'completed';
