-- A host's record with renters, for the matcher's ties between equal floors (DESIGN.md "Matching": "break ties
-- by reliability"; engine Reliability): the rentals whose workload started on the host, and those of them that
-- ended host_lost. Its own table, written only by the rental projection (RentalProjection, one upsert a group,
-- rows locked in host_id order), so the hosts projection, which writes the hosts rows in event order, never
-- waits on it or deadlocks with it; the hosts queries read it with a LEFT JOIN (no row: no record yet).
CREATE TABLE IF NOT EXISTS host_records (
  host_id VARCHAR(64) PRIMARY KEY,
  rentals_started BIGINT NOT NULL DEFAULT 0,
  rentals_lost BIGINT NOT NULL DEFAULT 0
);
-- The record so far, from the rentals read model as it stands: the projection counts what it writes from now on.
INSERT INTO host_records (host_id, rentals_started, rentals_lost)
SELECT host_id, count(*), count(*) FILTER (WHERE end_reason = 'host_lost')
  FROM rentals WHERE host_id IS NOT NULL AND started_at IS NOT NULL
 GROUP BY host_id
ON CONFLICT (host_id) DO NOTHING;
