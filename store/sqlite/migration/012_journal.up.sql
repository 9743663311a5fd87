-- superstep schema version 12: the run journal (store.Journal). One row per entry a
-- superstep appended before its commit: a finished model call, tool call
-- or sub-step. seq orders a run's entries; rows of a run's steps up to a
-- commit's step are deleted by that commit (CommitParams.JournalPrune), and
-- all of a run's rows with the run. created_at is Unix nanoseconds.
CREATE TABLE journal (
  seq        INTEGER PRIMARY KEY,
  run_id     TEXT    NOT NULL,
  step       INTEGER NOT NULL,
  epoch      INTEGER NOT NULL,
  key        TEXT    NOT NULL,
  hash       TEXT    NOT NULL,
  data       BLOB,
  created_at INTEGER NOT NULL
);
CREATE INDEX journal_run ON journal (run_id, step, seq);
