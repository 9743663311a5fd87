-- superstep schema version 21 changes no table: a blob written with a new
-- run's create may hold a reference to that response's request
-- (store/internal/partref) in place of the part's bytes, which a build of
-- version 20 or older would read as a part that does not match its hash.
-- The version bump makes such a build refuse the database instead.
SELECT 1;
