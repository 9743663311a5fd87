-- superstep schema version 7: idempotency keys (Idempotency-Key on
-- POST /v1/responses). One row per (owner, key), written by ResponseCreate
-- in the transaction that creates response_id; request_hash is the host's
-- hash of the request body. A row counts for store.IdempotencyWindow after
-- created_at (Unix nanoseconds); older rows are replaced, and deleted a few
-- at a time by creates that record a key (through idempotency_keys_created).
-- A response's row goes with it (ResponseDelete, ResponsePrune: through
-- idempotency_keys_response).
CREATE TABLE idempotency_keys (
  owner        TEXT    NOT NULL,
  key          TEXT    NOT NULL,
  request_hash TEXT    NOT NULL,
  response_id  TEXT    NOT NULL,
  created_at   INTEGER NOT NULL,
  PRIMARY KEY (owner, key)
) WITHOUT ROWID;
CREATE INDEX idempotency_keys_response ON idempotency_keys (response_id);
CREATE INDEX idempotency_keys_created ON idempotency_keys (created_at);
