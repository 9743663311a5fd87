-- superstep schema version 8: conversations (the Conversations API) and the
-- index of pending function calls (a function_call_output answering a
-- workflow's request by call_id alone).
--
-- A conversation's items are rows of their own, ordered by seq (given by
-- the conversation's next_seq, never reused): a turn's terminal commit
-- appends its items in the commit's transaction. turn_response_id names the
-- response whose turn holds the conversation ('' for none); a response that
-- is gone or finished holds none, whatever it says. version counts the item
-- changes, so a turn can check the items it read are still the items.
CREATE TABLE conversations (
  id               TEXT    NOT NULL PRIMARY KEY,
  owner            TEXT    NOT NULL,
  metadata         BLOB,
  turn_response_id TEXT    NOT NULL DEFAULT '',
  version          INTEGER NOT NULL DEFAULT 0,
  next_seq         INTEGER NOT NULL DEFAULT 0,
  created_at       INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE conversation_items (
  conversation_id TEXT    NOT NULL,
  seq             INTEGER NOT NULL,
  item_id         TEXT    NOT NULL,
  data            BLOB    NOT NULL,
  created_at      INTEGER NOT NULL,
  PRIMARY KEY (conversation_id, seq)
) WITHOUT ROWID;
CREATE UNIQUE INDEX conversation_items_id ON conversation_items (conversation_id, item_id);
-- pending_calls: the call ids a response's terminal commit left waiting for
-- an answer (its function_call items), so that an answer naming only the
-- call_id finds the response. Written by that commit
-- (store.CommitParams.PendingCalls); a row goes with its response
-- (ResponseDelete, ResponsePrune). A row may outlive the call's pending
-- state (it was answered): readers check the response.
CREATE TABLE pending_calls (
  owner       TEXT NOT NULL,
  call_id     TEXT NOT NULL,
  response_id TEXT NOT NULL,
  PRIMARY KEY (owner, call_id)
) WITHOUT ROWID;
CREATE INDEX pending_calls_response ON pending_calls (response_id);
