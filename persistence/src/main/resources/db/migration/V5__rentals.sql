-- Read side of rentals, written by the rental projection: the renter's list with cursor paging.
-- The Rental entity stays the authority (GET /v1/rentals/{id} asks it).
CREATE TABLE IF NOT EXISTS rentals (
  row_id BIGSERIAL UNIQUE,
  rental_id VARCHAR(64) PRIMARY KEY,
  renter_id VARCHAR(64) NOT NULL,
  status VARCHAR(16) NOT NULL,
  gpu VARCHAR(64) NOT NULL,
  card_count INTEGER NOT NULL,
  tier VARCHAR(16) NOT NULL,
  region VARCHAR(32),
  max_price_per_gpu_hour BIGINT NOT NULL,
  price_per_gpu_hour BIGINT,
  host_id VARCHAR(64),
  simulated BOOLEAN NOT NULL DEFAULT FALSE,
  created_at TIMESTAMPTZ NOT NULL,
  matched_at TIMESTAMPTZ,
  started_at TIMESTAMPTZ,
  ended_at TIMESTAMPTZ,
  end_reason VARCHAR(32),
  billed_seconds BIGINT NOT NULL DEFAULT 0,
  cost BIGINT NOT NULL DEFAULT 0,
  preemption_deadline TIMESTAMPTZ,
  updated_at TIMESTAMPTZ NOT NULL
);
CREATE INDEX IF NOT EXISTS rentals_renter_idx ON rentals (renter_id, row_id);
CREATE INDEX IF NOT EXISTS rentals_status_idx ON rentals (status);
