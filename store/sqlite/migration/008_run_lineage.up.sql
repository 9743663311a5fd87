-- superstep schema version 8: run inspection and forks (issue 18).
-- runs.forked_from_run / forked_from_step: the run and step a forked run
-- started from ('' and -1 for a run that is not a fork), written by the
-- create of the fork and never changed. runs_created pages the runs in
-- creation order (GET /v1/runs), newest or oldest first.
ALTER TABLE runs ADD COLUMN forked_from_run TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN forked_from_step INTEGER NOT NULL DEFAULT -1;
CREATE INDEX runs_created ON runs (created_at, id);
