-- 023_checkpoint_chunks: no table changes. The host may now store a big
-- state or executor part of a checkpoint as content-defined chunks, parts
-- named "chunk/<i>/<n>/<name>" (host/chunks.go), which a build of version
-- 22 or older would hand to the workflow as parts it does not know and
-- fail to restore the run: the version is bumped so that such a build
-- refuses this database at Open instead (hosts sharing a database run one
-- version).
SELECT 1;
