-- superstep schema version 13: no table changes. Event records may now
-- store a long JSON string that repeats within the record once (see
-- store/internal/eventrec, Encode), which a build of version 12 or older
-- reads as corrupt. The version is bumped so that such a build refuses
-- this database at Open instead of failing on the records it cannot read.
SELECT 1;
