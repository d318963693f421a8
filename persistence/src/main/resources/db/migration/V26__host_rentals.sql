-- A provider's view of the rentals that ran on one of its hosts (GET /v1/hosts/{id}/rentals): what each earned the
-- provider (the cumulative provider share of its latest settlement, µ€, as the rentals projection writes it from the
-- rental's Settled events) and an index to find a host's rentals newest first.
ALTER TABLE rentals ADD COLUMN IF NOT EXISTS provider_earned BIGINT NOT NULL DEFAULT 0;
CREATE INDEX IF NOT EXISTS rentals_host_idx ON rentals (host_id, row_id);
-- Rows of rentals settled before this migration: their earnings as the ledger booked them (one 'earning' leg per
-- settlement, keyed by the rental's id), so a host's history is whole from the start. A running rental's figure is
-- rewritten whole by its next settlement; a settlement the ledger projection had not yet written when this ran is
-- missing from an ended rental's figure (the ledger and the account's earnings have it).
UPDATE rentals r SET provider_earned = e.earned
  FROM (SELECT rental_id, SUM(amount) AS earned FROM ledger_entries WHERE kind = 'earning' GROUP BY rental_id) e
  WHERE r.rental_id = e.rental_id AND r.provider_earned = 0;
