-- superstep schema version 2: the host registry (store.HostRegistry). Times
-- are Unix nanoseconds. One process owns the file, so Open empties the
-- table (the hosts of a previous process are gone).
CREATE TABLE hosts (
  id           TEXT    NOT NULL PRIMARY KEY,
  addr         TEXT    NOT NULL,
  max_runs     INTEGER NOT NULL,
  runs         INTEGER NOT NULL,
  started_at   INTEGER NOT NULL,
  heartbeat_at INTEGER NOT NULL,
  expires_at   INTEGER NOT NULL
) WITHOUT ROWID;
