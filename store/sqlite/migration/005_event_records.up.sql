-- superstep schema version 5: one log record per write. A commit, a live
-- append (EventAppend) or a response create stores its events as ONE row
-- of event_records covering the contiguous sequence range
-- first_seq..last_seq, instead of one row per event (W3 wrote ~1,200 event
-- rows per response): a commit then writes one row, and a reader slices the
-- record by sequence number. data is store/internal/eventrec's encoding
-- (per event: uvarint(len(type)) type uvarint(len(payload)+1) payload; 0
-- for a nil payload); step is shared by the record's events.
--
-- Keyed like the events table was (migration 001): k = responses.num << 32
-- | first seq, so a record is found by the greatest k at or below the
-- sequence number wanted, and a commit appends at the end of the last leaf.
CREATE TABLE event_records (
  k         INTEGER PRIMARY KEY, -- responses.num << 32 | first seq
  last_seq  INTEGER NOT NULL,    -- inclusive
  step      INTEGER NOT NULL,
  data      BLOB    NOT NULL,
  first_seq INTEGER GENERATED ALWAYS AS (k & 4294967295) VIRTUAL
);

-- Each old row becomes a record of one event. The uvarints are built as
-- hex text and the whole record decoded once by unhex: concatenating
-- blobs with || would go through TEXT. Lengths stay below 2^35 (SQLite's
-- blob limit is far lower), so five uvarint bytes suffice.
INSERT INTO event_records (k, last_seq, step, data)
SELECT k, seq, step, unhex(
    CASE
      WHEN tl < 128 THEN printf('%02x', tl)
      WHEN tl < 16384 THEN printf('%02x%02x', (tl & 127) | 128, tl >> 7)
      WHEN tl < 2097152 THEN printf('%02x%02x%02x', (tl & 127) | 128, ((tl >> 7) & 127) | 128, tl >> 14)
      WHEN tl < 268435456 THEN printf('%02x%02x%02x%02x', (tl & 127) | 128, ((tl >> 7) & 127) | 128,
        ((tl >> 14) & 127) | 128, tl >> 21)
      ELSE printf('%02x%02x%02x%02x%02x', (tl & 127) | 128, ((tl >> 7) & 127) | 128,
        ((tl >> 14) & 127) | 128, ((tl >> 21) & 127) | 128, tl >> 28)
    END || hex(t) ||
    CASE
      WHEN pl < 128 THEN printf('%02x', pl)
      WHEN pl < 16384 THEN printf('%02x%02x', (pl & 127) | 128, pl >> 7)
      WHEN pl < 2097152 THEN printf('%02x%02x%02x', (pl & 127) | 128, ((pl >> 7) & 127) | 128, pl >> 14)
      WHEN pl < 268435456 THEN printf('%02x%02x%02x%02x', (pl & 127) | 128, ((pl >> 7) & 127) | 128,
        ((pl >> 14) & 127) | 128, pl >> 21)
      ELSE printf('%02x%02x%02x%02x%02x', (pl & 127) | 128, ((pl >> 7) & 127) | 128,
        ((pl >> 14) & 127) | 128, ((pl >> 21) & 127) | 128, pl >> 28)
    END || hex(p))
FROM (
  SELECT k, seq, step, CAST(type AS BLOB) AS t, length(CAST(type AS BLOB)) AS tl,
    CAST(payload AS BLOB) AS p, length(CAST(payload AS BLOB)) + 1 AS pl
  FROM events
)
ORDER BY k;

DROP TABLE events;
