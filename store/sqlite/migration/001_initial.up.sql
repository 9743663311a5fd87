-- superstep schema version 1.
-- Times are Unix nanoseconds. Checkpoint parts are content-addressed per run:
-- a checkpoint row holds a manifest of (name, sha256, size) and the bytes live
-- once per run in blobs, so a commit writes only the parts that changed.
--
-- The logs a commit appends to (events, checkpoints) are rowid tables keyed
-- by one integer, k = owner number << 32 | sequence number (or step), where
-- the owner number is the response's (responses.num) or the run's
-- (runs.num). An append at the end of a table's last leaf then costs SQLite
-- one page (it starts a new leaf when that one is full) instead of the
-- three-sibling rebalancing of a keyed (WITHOUT ROWID) B-tree, and a row
-- may hold up to ~1 KB in its leaf with 1 KB pages (231 bytes in a WITHOUT
-- ROWID table). seq and step are virtual columns (computed, not stored).
-- Numbers fit 31 bits and seq and step 32 bits (the CHECKs and the store
-- enforce it), so k stays positive.

CREATE TABLE runs (
  id                TEXT    NOT NULL PRIMARY KEY,
  num               INTEGER NOT NULL CHECK (num BETWEEN 1 AND 2147483647),
  model             TEXT    NOT NULL,
  head_response_id  TEXT    NOT NULL,
  last_step         INTEGER NOT NULL,
  checkpoint_step   INTEGER NOT NULL, -- step of the newest checkpoint, -1 for none
  lease_owner       TEXT    NOT NULL,
  lease_epoch       INTEGER NOT NULL,
  lease_expires_at  INTEGER NOT NULL,
  active            INTEGER NOT NULL,
  created_at        INTEGER NOT NULL,
  updated_at        INTEGER NOT NULL
) WITHOUT ROWID;

CREATE UNIQUE INDEX runs_num ON runs (num);

CREATE INDEX runs_claimable ON runs (lease_expires_at) WHERE active = 1;

CREATE TABLE responses (
  num                  INTEGER PRIMARY KEY CHECK (num BETWEEN 1 AND 2147483647),
  id                   TEXT    NOT NULL UNIQUE,
  run_id               TEXT    NOT NULL,
  previous_response_id TEXT    NOT NULL,
  model                TEXT    NOT NULL,
  owner                TEXT    NOT NULL,
  status               TEXT    NOT NULL,
  request              BLOB,
  snapshot             BLOB,
  error                BLOB,
  usage                BLOB,
  next_seq             INTEGER NOT NULL,
  commit_step          INTEGER NOT NULL,
  cancel_requested     INTEGER NOT NULL,
  created_at           INTEGER NOT NULL,
  updated_at           INTEGER NOT NULL,
  completed_at         INTEGER
);

CREATE INDEX responses_run ON responses (run_id);

CREATE TABLE events (
  k           INTEGER PRIMARY KEY, -- responses.num << 32 | seq
  step        INTEGER NOT NULL,
  type        TEXT    NOT NULL,
  payload     BLOB    NOT NULL,
  seq         INTEGER GENERATED ALWAYS AS (k & 4294967295) VIRTUAL
);

CREATE TABLE checkpoints (
  k           INTEGER PRIMARY KEY, -- runs.num << 32 | step
  parent_step INTEGER NOT NULL,
  size        INTEGER NOT NULL,
  manifest    BLOB    NOT NULL,
  created_at  INTEGER NOT NULL,
  step        INTEGER GENERATED ALWAYS AS (k & 4294967295) VIRTUAL
);

CREATE TABLE blobs (
  run_id TEXT NOT NULL,
  hash   BLOB NOT NULL,
  data   BLOB NOT NULL,
  PRIMARY KEY (run_id, hash)
) WITHOUT ROWID;
