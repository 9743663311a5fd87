-- 007_idempotency_keys: idempotency keys (Idempotency-Key on
-- POST /v1/responses). One row per (owner, key), written by ResponseCreate
-- first in the transaction that creates response_id (a concurrent create
-- with the same key waits on the primary key and then finds the row);
-- request_hash is the host's hash of the request body. A row counts for
-- store.IdempotencyWindow after created_at; older rows are replaced, and
-- deleted a few at a time by creates that record a key (through
-- idempotency_keys_created). A response's row goes with it (ResponseDelete,
-- ResponsePrune: through idempotency_keys_response).
CREATE TABLE idempotency_keys (
    owner        text NOT NULL,
    key          text NOT NULL,
    request_hash text NOT NULL,
    response_id  text NOT NULL,
    created_at   timestamptz NOT NULL,
    PRIMARY KEY (owner, key)
);
CREATE INDEX idempotency_keys_response ON idempotency_keys (response_id);
CREATE INDEX idempotency_keys_created ON idempotency_keys (created_at);
