-- Read side of the ledger, written only by the ledger projection (exactly-once with its offsets).
-- One row per leg; a leg is identified by the event that produced it, so a replay cannot add a row twice.
CREATE TABLE IF NOT EXISTS ledger_entries (
  id BIGSERIAL PRIMARY KEY,
  account_id VARCHAR(64) NOT NULL,
  kind VARCHAR(32) NOT NULL,
  amount BIGINT NOT NULL,            -- µ€, signed as seen by the account's balance, held or earnings
  entry_key VARCHAR(300) NOT NULL,   -- the posting's deterministic key
  rental_id VARCHAR(128),
  at TIMESTAMPTZ NOT NULL,
  persistence_id VARCHAR(255) NOT NULL,
  sequence_number BIGINT NOT NULL,
  leg SMALLINT NOT NULL,
  UNIQUE (persistence_id, sequence_number, leg)
);
CREATE INDEX IF NOT EXISTS ledger_entries_account_idx ON ledger_entries (account_id, id);
CREATE INDEX IF NOT EXISTS ledger_entries_key_idx ON ledger_entries (entry_key);

-- API keys: only a SHA-256 of the secret is kept; the key id is public (it is the key's prefix).
CREATE TABLE IF NOT EXISTS api_keys (
  key_id VARCHAR(32) PRIMARY KEY,
  account_id VARCHAR(64) NOT NULL,
  secret_hash BYTEA NOT NULL,
  label VARCHAR(200),
  created_at TIMESTAMPTZ NOT NULL,
  revoked_at TIMESTAMPTZ
);
CREATE INDEX IF NOT EXISTS api_keys_account_idx ON api_keys (account_id);

-- Idempotency-Key replay store for money-moving POSTs, per caller.
CREATE TABLE IF NOT EXISTS idempotency_keys (
  principal VARCHAR(64) NOT NULL,
  idempotency_key VARCHAR(255) NOT NULL,
  request_hash BYTEA NOT NULL,
  status INTEGER,                    -- NULL while the first request is still running
  response_body TEXT,
  created_at TIMESTAMPTZ NOT NULL,
  PRIMARY KEY (principal, idempotency_key)
);
