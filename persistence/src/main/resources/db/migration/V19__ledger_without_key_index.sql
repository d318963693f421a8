-- No query reads ledger_entries by entry_key alone: statements go by (account_id, id), the audit by kind over
-- the whole table, and a replayed event is stopped by the (persistence_id, sequence_number, leg) constraint.
-- The index on the long keys was a fourth index written for every leg, three legs a settlement, and under
-- settlement load the ledger's inserts are PostgreSQL's largest cost (docs/benchmarks.md, "The settlement
-- write path, warm"). Dropping an index is instant.
DROP INDEX IF EXISTS ledger_entries_key_idx;
