-- What a rental was launched with, for the renter's list (GET /v1/rentals, tickmark ps --json, the console): the
-- image, the command (a JSON array of its arguments), whether it asked for outbound network, its spend limit (µ€)
-- and the snapshot it started from. The rental entity keeps them in its Requested event and GET /v1/rentals/{id}
-- shows them from there; the rentals projection writes them when it inserts the row. Rows of rentals launched
-- before this migration leave them null (the list then shows null, the rental itself shows them).
ALTER TABLE rentals ADD COLUMN IF NOT EXISTS image TEXT;
ALTER TABLE rentals ADD COLUMN IF NOT EXISTS command TEXT;
ALTER TABLE rentals ADD COLUMN IF NOT EXISTS network BOOLEAN;
ALTER TABLE rentals ADD COLUMN IF NOT EXISTS max_total BIGINT;
ALTER TABLE rentals ADD COLUMN IF NOT EXISTS restore VARCHAR(64);
