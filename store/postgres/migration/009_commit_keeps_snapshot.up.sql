-- 009_commit_keeps_snapshot: superstep_commit keeps the response's snapshot
-- when p_snapshot is NULL (store.CommitParams.Snapshot nil: a superstep that
-- changed nothing the Response object shows), so a silent superstep neither
-- encodes nor rewrites it (for a large snapshot, no new TOAST value). Same
-- signature as migration 008: only the body changes.
CREATE OR REPLACE FUNCTION superstep_commit(p_run text, p_epoch bigint, p_step bigint, p_response text,
    p_first bigint, p_count bigint, p_bytes bigint, p_data bytea,
    p_part_names text[], p_part_hashes bytea[], p_blob_hashes bytea[], p_blob_data bytea[],
    p_ref_hashes bytea[], p_size bigint,
    p_status text, p_snapshot bytea, p_error bytea, p_usage bytea,
    p_now timestamptz, p_terminal boolean, p_channel text, p_fail_at text, p_release boolean,
    OUT o_next_seq bigint, OUT o_bytes bigint)
LANGUAGE plpgsql
-- Custom plans would re-plan every statement on every call (their cost
-- estimates, knowing the array lengths, always look cheaper than the
-- generic plan's); planning then costs several times the execution.
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    v_n bigint := coalesce(p_count, 0);
    v_have bigint;
    v_parent bigint := p_step - 1;
BEGIN
    UPDATE runs SET last_step = p_step, active = NOT p_terminal, updated_at = p_now,
        lease_owner = CASE WHEN p_release AND p_terminal THEN '' ELSE lease_owner END,
        lease_expires_at = CASE WHEN p_release AND p_terminal THEN p_now ELSE lease_expires_at END
    WHERE id = p_run AND lease_epoch = p_epoch AND lease_owner <> '' AND lease_expires_at > p_now
      AND last_step = p_step - 1 AND head_response_id = p_response;
    IF NOT FOUND THEN
        PERFORM superstep_fence(p_run, p_epoch, p_step, p_response, p_now);
    END IF;
    IF p_fail_at = 'commit.run_updated' THEN
        RAISE EXCEPTION 'injected fault at %', p_fail_at USING ERRCODE = 'SSI01';
    END IF;
    UPDATE responses SET next_seq = next_seq + v_n, commit_step = p_step, status = p_status,
        snapshot = coalesce(p_snapshot, snapshot), error = p_error, usage = p_usage,
        completed_at = CASE WHEN p_terminal THEN coalesce(completed_at, p_now) END, updated_at = p_now
    WHERE id = p_response AND status NOT IN ('completed', 'failed', 'cancelled', 'incomplete')
      AND (v_n = 0 OR next_seq = p_first)
    RETURNING next_seq INTO o_next_seq;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'response %: events do not continue the log, or the response is final', p_response
            USING ERRCODE = 'SSC01';
    END IF;
    IF p_fail_at = 'commit.response_updated' THEN
        RAISE EXCEPTION 'injected fault at %', p_fail_at USING ERRCODE = 'SSI01';
    END IF;
    -- The previous step always has a checkpoint (commits write one, prune
    -- keeps the last) except step 0 of a run created without one.
    IF p_step = 1 AND NOT EXISTS (SELECT 1 FROM checkpoints WHERE run_id = p_run AND step = 0) THEN
        v_parent := -1;
    END IF;
    -- The event record, new blobs and the checkpoint row in one statement; the
    -- parts sent by reference (disjoint from the new blobs) must exist.
    -- Every blob lookup goes through the (run_id, hash) key, one probe per
    -- part (LATERAL ... LIMIT 1 keeps the planner from scanning all of the
    -- run's blobs, whose number grows with its history).
    WITH ev AS (
        INSERT INTO event_records (response_id, first_seq, last_seq, step, bytes, data)
        SELECT p_response, p_first, p_first + v_n - 1, p_step, p_bytes, p_data WHERE v_n > 0),
    bl AS (
        INSERT INTO blobs (run_id, hash, size, data)
        SELECT p_run, u.h, octet_length(u.d), u.d FROM unnest(p_blob_hashes, p_blob_data) AS u(h, d)
        ON CONFLICT DO NOTHING RETURNING size),
    cp AS (
        INSERT INTO checkpoints (run_id, step, parent_step, part_names, part_hashes, size, created_at)
        VALUES (p_run, p_step, v_parent, p_part_names, p_part_hashes, p_size, p_now))
    SELECT (SELECT coalesce(sum(size), 0) FROM bl),
           CASE WHEN cardinality(p_ref_hashes) > 0 THEN
               (SELECT count(*) FROM unnest(p_ref_hashes) AS r(h),
                    LATERAL (SELECT 1 FROM blobs b WHERE b.run_id = p_run AND b.hash = r.h LIMIT 1) AS x)
           ELSE 0 END
    INTO o_bytes, v_have;
    IF v_have <> coalesce(cardinality(p_ref_hashes), 0) THEN
        RAISE EXCEPTION 'run %: referenced checkpoint part missing', p_run USING ERRCODE = 'SSB01';
    END IF;
    IF p_fail_at = 'commit.written' THEN
        RAISE EXCEPTION 'injected fault at %', p_fail_at USING ERRCODE = 'SSI01';
    END IF;
    IF p_channel <> '' AND (v_n > 0 OR p_terminal) THEN
        PERFORM pg_notify(p_channel, p_response);
    END IF;
END $$;
