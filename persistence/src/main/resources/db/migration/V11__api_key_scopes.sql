-- What an API key may do: a comma-separated subset of read, rent, provide, payouts. Keys made before
-- scopes existed keep everything they could do.
ALTER TABLE api_keys ADD COLUMN IF NOT EXISTS scopes VARCHAR(100) NOT NULL DEFAULT 'read,rent,provide,payouts';
