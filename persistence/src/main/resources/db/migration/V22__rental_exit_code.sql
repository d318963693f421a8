-- The exit status of a workload that ended by itself (end reason workload_exited), as the host's agent reported
-- it (0-255; 128 + N when signal N ended it); null for every other end, for agents that do not report it, and for
-- rentals that ended before this migration.
ALTER TABLE rentals ADD COLUMN IF NOT EXISTS exit_code INTEGER;
