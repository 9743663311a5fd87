-- superstep schema version 14: a placeholder on branch h-bytes for the 014
-- of another branch (PostgreSQL), so that 015 follows a contiguous
-- sequence here. Drop this file when that 014 is merged.
SELECT 1;
