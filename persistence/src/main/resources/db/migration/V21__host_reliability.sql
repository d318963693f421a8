-- A host's record with renters, for the matcher's ties between equal floors (DESIGN.md "Matching": "break ties
-- by reliability"; engine market.Reliability): the rentals whose workload ran on the host and have ended, and
-- those of them that ended host_lost. The hosts projection counts them from each release of a rental's cards
-- (Host.CardsReleased ran/lost), in the statement that already returns the cards: the hosts rows keep one
-- writer, and the matcher's candidate query reads them without a join. Counted from this migration on: the
-- releases before it did not say whether the rental ran or was lost.
ALTER TABLE hosts ADD COLUMN IF NOT EXISTS rentals_ended BIGINT NOT NULL DEFAULT 0;
ALTER TABLE hosts ADD COLUMN IF NOT EXISTS rentals_lost BIGINT NOT NULL DEFAULT 0;
