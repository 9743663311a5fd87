-- 017_compressed_records: no table changes. An event record of 16 KiB or
-- more may now be stored zstd-compressed (store/internal/eventrec,
-- compress.go), which a build of version 16 or older would read as
-- damage: the version is bumped so that such a build refuses this
-- database at Open instead.
--
-- (STORAGE MAIN for event_records.data, keeping a ~3 KB compressed record
-- in its row rather than in TOAST, was measured and did not help: W3 on
-- PostgreSQL 361-371 wf/s with it, 385-423 without.)
SELECT 1;
