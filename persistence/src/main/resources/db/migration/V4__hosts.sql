-- Read side of hosts, written by the host projection: the provider's host list, the operator's
-- host list and the market's live capacity (offers). The Host entity stays the authority on cards.
CREATE TABLE IF NOT EXISTS hosts (
  host_id VARCHAR(64) PRIMARY KEY,
  owner_id VARCHAR(64) NOT NULL,
  region VARCHAR(32) NOT NULL,
  label VARCHAR(200),
  status VARCHAR(16) NOT NULL,
  online BOOLEAN NOT NULL DEFAULT FALSE,
  listed BOOLEAN NOT NULL DEFAULT FALSE,
  draining BOOLEAN NOT NULL DEFAULT FALSE,
  simulated BOOLEAN NOT NULL DEFAULT FALSE,
  gpu VARCHAR(64),
  cards_total INTEGER NOT NULL DEFAULT 0,
  cards_taken INTEGER NOT NULL DEFAULT 0,
  on_demand_price BIGINT,
  spot_price BIGINT,
  spot_notice_seconds INTEGER,
  availability TEXT NOT NULL DEFAULT '[]',
  created_at TIMESTAMPTZ NOT NULL,
  updated_at TIMESTAMPTZ NOT NULL
);
CREATE INDEX IF NOT EXISTS hosts_owner_idx ON hosts (owner_id, created_at);
CREATE INDEX IF NOT EXISTS hosts_status_idx ON hosts (status);
CREATE INDEX IF NOT EXISTS hosts_market_idx ON hosts (gpu, region)
  WHERE status = 'verified' AND online AND listed AND NOT draining;
