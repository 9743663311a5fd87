-- 020_lz4_toast: the columns that hold a response's, a checkpoint's or an
-- event record's bytes are TOAST-compressed with lz4 instead of pglz, on
-- servers built with lz4 (PostgreSQL 14 and newer; Debian's, the official
-- images' and the big clouds' are). PostgreSQL compresses a row's large
-- values itself (TOAST, past ~2 KB), and with pglz that cost W3 on
-- PostgreSQL (one 200-message commit per response: its checkpoint blob,
-- its request and the snapshot of the completed response) pglz_compress
-- at ~9 % of the server's CPU; lz4 compresses such JSON about as well, in
-- a fraction of the time, and gives up on what it cannot compress (a
-- record store/internal/eventrec already compressed with zstd) as quickly.
-- bench W3 on PostgreSQL, c=8, two interleaved idle pairs: pglz 794 and
-- 747 wf/s, lz4 887 and 774.
--
-- Metadata only: values stored before keep their pglz form (both read
-- the same), new values take lz4. A server without lz4 keeps pglz; the
-- migration changes nothing there.
DO $$
DECLARE
    col text;
BEGIN
    IF current_setting('server_version_num')::int < 140000 OR NOT EXISTS (
        SELECT 1 FROM pg_settings WHERE name = 'default_toast_compression' AND 'lz4' = ANY (enumvals)) THEN
        RETURN;
    END IF;
    FOREACH col IN ARRAY ARRAY['responses.request', 'responses.snapshot', 'responses.input', 'blobs.data',
        'event_records.data', 'checkpoints.manifest', 'journal.data', 'conversation_items.data'] LOOP
        EXECUTE format('ALTER TABLE %I ALTER COLUMN %I SET COMPRESSION lz4', split_part(col, '.', 1), split_part(col, '.', 2));
    END LOOP;
END $$;
