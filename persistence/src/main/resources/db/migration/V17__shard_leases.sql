-- Shard leases (docs/runbook.md "Failover timing and split brain"): a shard, and a shard coordinator, runs only on the
-- node holding its lease. Each node incarnation keeps one row in lease_holders alive, renewing it every second; a
-- lease may be taken over only once its holder's row has expired. `leases` changes only when a shard starts, moves
-- or stops, so the steady cost is one UPDATE per node per second. A node refused a lease marks it wanted_by: the
-- holder then checks whether the lease's shard still runs there and releases it if not (Pekko 1.2's shards do not
-- release their lease when they stop, e.g. when they are rebalanced to another node).
CREATE TABLE IF NOT EXISTS lease_holders (
  holder     TEXT PRIMARY KEY,
  expires_at TIMESTAMPTZ NOT NULL
);
CREATE TABLE IF NOT EXISTS leases (
  name        TEXT PRIMARY KEY,
  holder      TEXT NOT NULL,
  acquired_at TIMESTAMPTZ NOT NULL,
  wanted_by   TEXT
);
CREATE INDEX IF NOT EXISTS leases_holder_idx ON leases (holder);
CREATE INDEX IF NOT EXISTS leases_wanted_idx ON leases (holder) WHERE wanted_by IS NOT NULL;
