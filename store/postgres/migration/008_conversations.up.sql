-- 008_conversations: conversations (the Conversations API) and the index of
-- pending function calls (a function_call_output answering a workflow's
-- request by call_id alone). See the SQLite twin for the rules: items are
-- rows of their own ordered by seq (from next_seq, never reused), appended
-- by a turn's terminal commit in its transaction (sent in the same
-- transaction as superstep_commit); turn_response_id names the turn in
-- flight ('' for none; a gone or finished response holds none); version
-- counts item changes.
CREATE TABLE conversations (
    id               text        NOT NULL PRIMARY KEY,
    owner            text        NOT NULL,
    metadata         bytea,
    turn_response_id text        NOT NULL DEFAULT '',
    version          bigint      NOT NULL DEFAULT 0,
    next_seq         bigint      NOT NULL DEFAULT 0,
    created_at       timestamptz NOT NULL
);
CREATE TABLE conversation_items (
    conversation_id text        NOT NULL,
    seq             bigint      NOT NULL,
    item_id         text        NOT NULL,
    data            bytea       NOT NULL,
    created_at      timestamptz NOT NULL,
    PRIMARY KEY (conversation_id, seq)
);
CREATE UNIQUE INDEX conversation_items_id ON conversation_items (conversation_id, item_id);
CREATE TABLE pending_calls (
    owner       text NOT NULL,
    call_id     text NOT NULL,
    response_id text NOT NULL,
    PRIMARY KEY (owner, call_id)
);
CREATE INDEX pending_calls_response ON pending_calls (response_id);
