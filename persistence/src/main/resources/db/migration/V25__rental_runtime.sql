-- The runtime a renter asked a rental to run in (docker, sandbox or process; null: any), for the renter's list as
-- V24's columns are. Rows of rentals launched before it, and of those that named none, leave it null.
ALTER TABLE rentals ADD COLUMN IF NOT EXISTS runtime VARCHAR(16);
