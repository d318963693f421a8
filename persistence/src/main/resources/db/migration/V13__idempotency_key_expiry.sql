-- Idempotency-Key records expire, and one left "in progress" by a crashed node is taken over by the next request with
-- its key. claim_id names the request holding a claim, so a first request that answers after its claim was taken
-- over cannot overwrite the answer of the one that took it; the created_at index serves the periodic cleanup.
ALTER TABLE idempotency_keys ADD COLUMN IF NOT EXISTS claim_id BIGINT;
CREATE INDEX IF NOT EXISTS idempotency_keys_created_idx ON idempotency_keys (created_at);
