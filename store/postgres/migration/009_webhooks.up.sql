-- 009_webhooks: the webhook outbox. Rows are written by the commit that
-- finishes a response (store.CommitParams.Webhooks), in the transaction of
-- its superstep_commit call: one per (event, endpoint). A pending row is
-- due at next_attempt_at, which a claim (FOR UPDATE SKIP LOCKED) moves to
-- the claim's expiry, so a claim whose host died is due again then;
-- attempts counts claims and fences reports. Rows outlive their response
-- (the event happened); delivered and failed rows are pruned by done_at.
CREATE TABLE webhook_deliveries (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    event_id        text NOT NULL,
    type            text NOT NULL,
    response_id     text NOT NULL,
    endpoint        text NOT NULL,
    status          text NOT NULL DEFAULT 'pending',
    attempts        integer NOT NULL DEFAULT 0,
    created_at      timestamptz NOT NULL,
    next_attempt_at timestamptz NOT NULL,
    claim_owner     text NOT NULL DEFAULT '',
    last_error      text NOT NULL DEFAULT '',
    done_at         timestamptz,
    UNIQUE (event_id, endpoint)
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at, id) WHERE status = 'pending';
CREATE INDEX webhook_deliveries_done ON webhook_deliveries (done_at) WHERE status <> 'pending';
CREATE INDEX webhook_deliveries_response ON webhook_deliveries (response_id);
