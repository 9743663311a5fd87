-- superstep schema version 16: no table changes here. Version 16 changed
-- the PostgreSQL store (small checkpoint parts inline in the checkpoint
-- row, no response-row write on a silent commit); the SQLite store keeps
-- the same version numbers.
SELECT 1;
