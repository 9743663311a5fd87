-- superstep schema version 17: no table changes. An event record of 16 KiB
-- or more may now be stored zstd-compressed (store/internal/eventrec,
-- compress.go), which a build of version 16 or older would read as
-- damage: the version is bumped so that such a build refuses this
-- database at Open instead.
SELECT 1;
