-- superstep schema version 18 changed PostgreSQL only (its commit
-- functions, for less CPU per commit); versions are contiguous per
-- backend, so SQLite's 18 is a no-op.
SELECT 1;
