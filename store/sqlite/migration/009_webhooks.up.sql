-- superstep schema version 9: the webhook outbox. Rows are written by the
-- commit that finishes a response (store.CommitParams.Webhooks), in its
-- transaction: one per (event, endpoint). A pending row is due at
-- next_attempt_at, which a claim moves to the claim's expiry (so a claim
-- whose holder died is due again then); attempts counts claims and fences
-- reports. Times are Unix nanoseconds. Rows outlive their response (the
-- event happened); delivered and failed rows are pruned by done_at.
CREATE TABLE webhook_deliveries (
  id              INTEGER PRIMARY KEY,
  event_id        TEXT    NOT NULL,
  type            TEXT    NOT NULL,
  response_id     TEXT    NOT NULL,
  endpoint        TEXT    NOT NULL,
  status          TEXT    NOT NULL DEFAULT 'pending',
  attempts        INTEGER NOT NULL DEFAULT 0,
  created_at      INTEGER NOT NULL,
  next_attempt_at INTEGER NOT NULL,
  claim_owner     TEXT    NOT NULL DEFAULT '',
  last_error      TEXT    NOT NULL DEFAULT '',
  done_at         INTEGER,
  UNIQUE (event_id, endpoint)
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at, id) WHERE status = 'pending';
CREATE INDEX webhook_deliveries_done ON webhook_deliveries (done_at) WHERE status <> 'pending';
CREATE INDEX webhook_deliveries_response ON webhook_deliveries (response_id);
