-- superstep schema version 11: run inspection and forks (issue 18).
-- runs.forked_from_run / forked_from_step: the run and step a forked run
-- started from ('' and -1 for a run that is not a fork), written by the
-- create of the fork and never changed. runs_created pages the runs in
-- creation order (GET /v1/runs), newest or oldest first.
ALTER TABLE runs ADD COLUMN forked_from_run TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN forked_from_step INTEGER NOT NULL DEFAULT -1;
CREATE INDEX runs_created ON runs (created_at, id);

-- lease_claims: one row per claim of a run's lease (ResponseCreate with a
-- lease owner, LeaseClaim): the epoch, its owner, and the run's last step
-- then. A step s was committed under the greatest epoch claimed at a last
-- step below s (commits are fenced by epoch), so the inspection API tells
-- the epoch and host of every superstep, and the takeovers, from a write
-- per claim rather than one per commit. Deleted with the run.
CREATE TABLE lease_claims (
  run_id     TEXT    NOT NULL,
  epoch      INTEGER NOT NULL,
  owner      TEXT    NOT NULL,
  last_step  INTEGER NOT NULL,
  claimed_at INTEGER NOT NULL,
  PRIMARY KEY (run_id, epoch)
) WITHOUT ROWID;
