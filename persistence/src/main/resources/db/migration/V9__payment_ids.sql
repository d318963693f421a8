-- Payment ids are the payment provider's, unique across the platform: the first account a payment id
-- is credited to keeps it, and a replay of the same id to another account (or with another amount) is
-- refused before any Account entity is asked. (V8 is left to the rental logs migration.)
CREATE TABLE IF NOT EXISTS payment_ids (
  payment_id VARCHAR(200) PRIMARY KEY,
  account_id VARCHAR(64) NOT NULL,
  amount BIGINT NOT NULL,            -- µ€
  claimed_at TIMESTAMPTZ NOT NULL
);

-- Payments credited before this table existed, as far as the ledger read side has them: the earliest
-- credit of each id keeps it.
INSERT INTO payment_ids (payment_id, account_id, amount, claimed_at)
SELECT DISTINCT ON (substring(entry_key FROM 17))
       substring(entry_key FROM 17), account_id, amount, at
  FROM ledger_entries
 WHERE entry_key LIKE 'deposit:payment:%'
 ORDER BY substring(entry_key FROM 17), id
ON CONFLICT DO NOTHING;
