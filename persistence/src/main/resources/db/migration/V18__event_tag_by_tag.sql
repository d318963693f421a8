-- The projections read events by tag over an offset range (TagRangeReadJournalDao): this index lets each of them
-- read its own tag's new rows, instead of probing event_tag for every new event of every tag, or scanning it whole.
-- A journal that is already large is locked for writes while it builds: create it beforehand with
--   CREATE INDEX CONCURRENTLY IF NOT EXISTS event_tag_tag_idx ON event_tag (tag, event_id);
-- and this migration then finds it (docs/runbook.md, "Upgrading").
CREATE INDEX IF NOT EXISTS event_tag_tag_idx ON event_tag (tag, event_id);
