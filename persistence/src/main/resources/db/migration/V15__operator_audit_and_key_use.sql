-- What operators did through /ops: one row per mutating request that passed the operator token, written by the
-- HTTP edge after the answer (its outcome is the answer's status). Never a token or a request body: who is the
-- operator's name (TICKMARK_OPERATOR_TOKENS), what is the operation's template, target the id in its path.
CREATE TABLE IF NOT EXISTS operator_audit (
  id BIGSERIAL PRIMARY KEY,
  at TIMESTAMPTZ NOT NULL,
  operator VARCHAR(64) NOT NULL,
  method VARCHAR(10) NOT NULL,
  action VARCHAR(200) NOT NULL,      -- the operation, e.g. POST /ops/hosts/{id}/evict
  target VARCHAR(200),               -- the {id} of the path, when it has one
  status INTEGER NOT NULL,           -- the HTTP status answered
  client_address VARCHAR(64) NOT NULL
);
CREATE INDEX IF NOT EXISTS operator_audit_at_idx ON operator_audit (at, id);

-- An API key's last use (recorded at most about once a minute per key and node, off the request path), and its
-- optional expiry: past it the key is refused with 401 key_expired.
ALTER TABLE api_keys ADD COLUMN IF NOT EXISTS last_used_at TIMESTAMPTZ;
ALTER TABLE api_keys ADD COLUMN IF NOT EXISTS expires_at TIMESTAMPTZ;
