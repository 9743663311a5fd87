-- superstep schema version 14: nothing for SQLite. PostgreSQL's migration
-- 014 adds superstep_commit_batch, one statement for all the commits of a
-- group-commit batch instead of a savepoint and a statement per member.
SELECT 1;
