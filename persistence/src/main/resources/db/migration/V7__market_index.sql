-- The matcher reads the cheapest few hosts of a GPU model that are on the market: index exactly that,
-- so a match costs the same with ten hosts or ten thousand.
CREATE INDEX IF NOT EXISTS hosts_market_on_demand_idx ON hosts (gpu, on_demand_price)
  WHERE status = 'verified' AND online AND listed AND NOT draining;
CREATE INDEX IF NOT EXISTS hosts_market_spot_idx ON hosts (gpu, spot_price)
  WHERE status = 'verified' AND online AND listed AND NOT draining AND spot_price IS NOT NULL;
