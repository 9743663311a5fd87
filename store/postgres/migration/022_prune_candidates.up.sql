-- 022_prune_candidates: a checkpoint prune collects only the blobs the
-- checkpoints it deleted referred to. It looked at every blob of the run
-- and, for each, at every checkpoint of the run: a run keeps the
-- checkpoint each finished response resumes from, so a conversation of n
-- turns has n of both, and each turn's prune cost O(n^2) (a terminal
-- commit of turn 1,200 took ~40 ms). A blob can become unreferenced only
-- when a checkpoint that referred to it is deleted, so those are the
-- candidates; each is still kept while any checkpoint of the run refers to
-- it. No table changes.
CREATE OR REPLACE FUNCTION superstep_prune_checkpoints(p_run text, p_keep int, p_last bigint) RETURNS bigint
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    v_cnt bigint;
    v_hashes bytea[];
BEGIN
    WITH d AS (
        DELETE FROM checkpoints WHERE run_id = p_run AND step <> p_last
            AND step NOT IN (SELECT c.step FROM checkpoints c WHERE c.run_id = p_run ORDER BY c.step DESC LIMIT p_keep)
            AND step NOT IN (SELECT commit_step FROM responses WHERE run_id = p_run AND completed_at IS NOT NULL)
        RETURNING part_hashes)
    SELECT (SELECT count(*) FROM d), (SELECT array_agg(DISTINCT h) FROM d, unnest(d.part_hashes) AS u(h))
    INTO v_cnt, v_hashes;
    IF cardinality(v_hashes) > 0 THEN
        DELETE FROM blobs b WHERE b.run_id = p_run AND b.hash = ANY (v_hashes) AND NOT EXISTS (
            SELECT 1 FROM checkpoints c WHERE c.run_id = p_run AND b.hash = ANY (c.part_hashes));
    END IF;
    RETURN v_cnt;
END $$;
