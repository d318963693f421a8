-- An account's SSH public keys: what its rentals' SSH servers accept when a launch names no
-- ssh_public_key. Public keys only; one key at most once per account.
CREATE TABLE IF NOT EXISTS ssh_keys (
  key_id VARCHAR(64) PRIMARY KEY,
  account_id VARCHAR(64) NOT NULL,
  name VARCHAR(200) NOT NULL,
  public_key VARCHAR(8192) NOT NULL,
  fingerprint VARCHAR(100) NOT NULL,
  created_at TIMESTAMPTZ NOT NULL,
  UNIQUE (account_id, fingerprint)
);
CREATE INDEX IF NOT EXISTS ssh_keys_by_account ON ssh_keys (account_id, created_at);
