-- superstep schema version 15: no table changes. A response's snapshot of
-- 4 KiB or more may now be stored as a reference to the bytes of the event
-- that carries it (see store/internal/snapref), which a build of version 14
-- or older would return as the snapshot. The version is bumped so that such
-- a build refuses this database at Open instead of serving a reference.
SELECT 1;
