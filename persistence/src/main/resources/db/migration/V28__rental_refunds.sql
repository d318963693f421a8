-- What operators' refunds gave back of a rental's charge (µ€, cumulative, from the rental's Refunded events) and the
-- provider's share of it, so that lists show a rental's refunds and a host's rentals what they earned net of them.
ALTER TABLE rentals ADD COLUMN IF NOT EXISTS refunded BIGINT NOT NULL DEFAULT 0;
ALTER TABLE rentals ADD COLUMN IF NOT EXISTS provider_reversed BIGINT NOT NULL DEFAULT 0;
