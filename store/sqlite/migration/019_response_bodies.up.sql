-- superstep schema version 19: a response's request and recorded input,
-- when they hold 1 KiB or more together, live in response_bodies (keyed by
-- the response's number) and the response's row holds NULL for both.
--
-- A row too large for its leaf page keeps the rest in overflow pages, and
-- an UPDATE that changes the row's size (a commit's new snapshot, status,
-- error or usage) writes the whole row again, overflow pages included: a
-- 256 KiB request was written to the WAL again by every such commit of
-- its response. A row of response_bodies is written once, by the create,
-- and deleted with its response.
CREATE TABLE response_bodies (
  num     INTEGER PRIMARY KEY, -- responses.num
  request BLOB,
  input   BLOB
);

INSERT INTO response_bodies (num, request, input)
  SELECT num, request, input FROM responses
  WHERE coalesce(length(CAST(request AS BLOB)), 0) + coalesce(length(CAST(input AS BLOB)), 0) >= 1024;

UPDATE responses SET request = NULL, input = NULL WHERE num IN (SELECT num FROM response_bodies);
