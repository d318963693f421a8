-- The runtime a renter asked a rental to run in (docker, sandbox or process; null: any), for the renter's list as
-- V24's columns are, and the runtime of the host it was matched to (null until matched, or where that host's agent
-- had not said): only docker runs the rental's image. Rows of rentals launched before this migration leave both null.
ALTER TABLE rentals ADD COLUMN IF NOT EXISTS runtime VARCHAR(16);
ALTER TABLE rentals ADD COLUMN IF NOT EXISTS host_runtime VARCHAR(16);
