-- Payouts the bank returned (a closed account, a wrong name): the run's list shows how many and how much.
-- Their money is back in the provider's earnings through the ledger's payout_returned rows.
ALTER TABLE payout_runs ADD COLUMN IF NOT EXISTS returned_total BIGINT NOT NULL DEFAULT 0;
ALTER TABLE payout_runs ADD COLUMN IF NOT EXISTS returned_count INTEGER NOT NULL DEFAULT 0;
