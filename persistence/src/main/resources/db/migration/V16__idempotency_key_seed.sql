-- A launch retried with its Idempotency-Key after a 5xx (the engine did not answer in time) or after its node crashed
-- must land on the rental the first attempt may have created, not start a second one. The rental's id derives from
-- `seed`, drawn once per record: a 5xx now marks the record `released` (the next request with the same key and body
-- takes it over, seed and all) instead of deleting it, and only an expired record, a different body after a release,
-- or an answer that is known to have done nothing (the record is then deleted) gets a new seed.
ALTER TABLE idempotency_keys ADD COLUMN IF NOT EXISTS seed BIGINT;
ALTER TABLE idempotency_keys ADD COLUMN IF NOT EXISTS released BOOLEAN NOT NULL DEFAULT FALSE;
