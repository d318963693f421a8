-- event_tag's foreign key to event_journal (the plugin's schema, V1) checked every tag row against the journal
-- and locked the event's row FOR KEY SHARE: without it a batch of tagged events takes 0.6 of the time (docs/
-- benchmarks.md, "The journal's tag rows without a foreign key"). Tag rows are written only by the journal's
-- own DAO (BatchedJournalDao), in the statement that writes their events, from the orderings that statement
-- returns, so each one names an event by construction. Its ON DELETE CASCADE removed the tags of deleted
-- events; no Tickmark entity that tags its events deletes them (money-bearing events are kept for ever; the
-- journal probe deletes its own, untagged ones). Dropping a constraint is instant.
ALTER TABLE event_tag DROP CONSTRAINT IF EXISTS fk_event_journal;
