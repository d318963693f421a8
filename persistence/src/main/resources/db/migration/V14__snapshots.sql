-- Snapshot bytes (issue 12): content-addressed chunks, each stored once however many snapshots name it, and each
-- snapshot's manifest (its ordered chunk list). The collector deletes chunks no manifest names once past a grace.
CREATE TABLE IF NOT EXISTS snapshot_chunks (
  sha256 TEXT PRIMARY KEY,
  data BYTEA NOT NULL,
  size_bytes INTEGER NOT NULL,
  stored_at TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS snapshot_chunks_stored_idx ON snapshot_chunks (stored_at);
CREATE TABLE IF NOT EXISTS snapshot_manifests (
  snapshot_id VARCHAR(64) NOT NULL,
  idx INTEGER NOT NULL,
  sha256 TEXT NOT NULL,
  PRIMARY KEY (snapshot_id, idx)
);
-- "does any manifest still name this chunk", for the collector
CREATE INDEX IF NOT EXISTS snapshot_manifests_sha_idx ON snapshot_manifests (sha256);

-- Read side of snapshots, written by the snapshot projection: the renter's list, the account's quota, the collector.
-- The Snapshot entity stays the authority (GET /v1/snapshots/{id} asks it, with its live cost).
CREATE TABLE IF NOT EXISTS snapshots (
  row_id BIGSERIAL UNIQUE,
  snapshot_id VARCHAR(64) PRIMARY KEY,
  renter_id VARCHAR(64) NOT NULL,
  status VARCHAR(16) NOT NULL,
  rental_id VARCHAR(64) NOT NULL,
  host_id VARCHAR(64) NOT NULL,
  gpu VARCHAR(64) NOT NULL,
  region VARCHAR(32),
  size_bytes BIGINT NOT NULL DEFAULT 0,
  sha256 TEXT,
  chunk_count INTEGER NOT NULL DEFAULT 0,
  created_at TIMESTAMPTZ NOT NULL,
  ready_at TIMESTAMPTZ,
  ended_at TIMESTAMPTZ,
  billed_seconds BIGINT NOT NULL DEFAULT 0,
  cost BIGINT NOT NULL DEFAULT 0,
  failure VARCHAR(64),
  failure_detail TEXT,
  suspended_at TIMESTAMPTZ,
  -- the entity's Closed: its last capture and its hold's release are done (a deleted snapshot without it
  -- still has money to move, and is woken after a node loss until it has)
  closed_at TIMESTAMPTZ,
  updated_at TIMESTAMPTZ NOT NULL
);
CREATE INDEX IF NOT EXISTS snapshots_renter_idx ON snapshots (renter_id, row_id);
CREATE INDEX IF NOT EXISTS snapshots_status_idx ON snapshots (status);
-- the rental list shows each rental's snapshot
CREATE INDEX IF NOT EXISTS snapshots_rental_idx ON snapshots (rental_id);
