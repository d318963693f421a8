-- How a host's agent runs rentals, from its latest passed hardware report (Host.ReportVerified): the runtime's name
-- (docker, sandbox, process) and whether it can give a rental outbound network (a sandbox without slirp4netns
-- cannot). The matcher's candidate query leaves out hosts that said they cannot (offers_network = FALSE) for a rental
-- that asks for network; null (agents older than 2026-12-07, hosts verified before this migration) is taken as able,
-- as it was, and the host entity refuses a proposal it cannot run anyway.
ALTER TABLE hosts ADD COLUMN IF NOT EXISTS runtime TEXT;
ALTER TABLE hosts ADD COLUMN IF NOT EXISTS offers_network BOOLEAN;
