-- The account changes that are not money but decide where money goes or whether it moves: payout
-- details set (and from when they apply), suspensions, spend caps. Written by the ledger projection in
-- the same transaction as the ledger rows, once per event.
CREATE TABLE IF NOT EXISTS account_audit (
  persistence_id VARCHAR(255) NOT NULL,
  sequence_number BIGINT NOT NULL,
  account_id VARCHAR(64) NOT NULL,
  kind VARCHAR(40) NOT NULL,
  detail VARCHAR(1000) NOT NULL,
  effective_at TIMESTAMPTZ,
  at TIMESTAMPTZ NOT NULL,
  PRIMARY KEY (persistence_id, sequence_number)
);
CREATE INDEX IF NOT EXISTS account_audit_by_account ON account_audit (account_id, at);
