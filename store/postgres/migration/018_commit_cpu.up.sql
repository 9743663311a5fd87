-- 018_commit_cpu: the same commit for less of the database's CPU (issue
-- 14). No table changes; the commit functions of migration 016 are
-- rewritten so that a superstep runs fewer executor start-ups:
--
--   - superstep_commit and superstep_commit_batch call
--     superstep_write_step as a PL/pgSQL simple expression (w := f(...))
--     instead of a query (SELECT * INTO w FROM f(...)): a query is
--     planned-out afresh per call (a function scan, its 25 argument
--     expressions compiled, its result kept in a tuplestore), a simple
--     expression is compiled once per transaction.
--   - superstep_write_step no longer carries its own SET plan_cache_mode:
--     a function with a SET clause is called through a GUC save and
--     restore each time, and its callers, which set it, are the only ones
--     that call it (a setting holds for the functions a function calls).
--   - The step-1 test for a parent checkpoint no longer is one statement
--     with a sub-select run (and its scan set up) on every step.
-- superstep_write_step: as in migration 016 (which says what it does).
CREATE OR REPLACE FUNCTION superstep_write_step(p_run text, p_epoch bigint, p_step bigint, p_response text,
    p_first bigint, p_count bigint, p_bytes bigint, p_data bytea,
    p_manifest bytea, p_part_hashes bytea[], p_blob_hashes bytea[], p_blob_data bytea[], p_ref_hashes bytea[], p_size bigint,
    p_status text, p_snapshot bytea, p_error bytea, p_usage bytea,
    p_now timestamptz, p_terminal boolean, p_release boolean, p_journal_prune boolean, p_prune_keep int,
    p_channel text, p_fail_at text,
    OUT o_code text, OUT o_message text, OUT o_detail text, OUT o_next_seq bigint, OUT o_bytes bigint, OUT o_pruned bigint)
LANGUAGE plpgsql
AS $$
DECLARE
    v_n bigint := coalesce(p_count, 0);
    v_parent bigint := p_step - 1;
    v_have bigint;
    v_same boolean := false;
BEGIN
    o_code := '';
    o_message := '';
    o_detail := '';
    o_bytes := 0;
    o_pruned := 0;
    UPDATE runs SET last_step = p_step, active = NOT p_terminal, updated_at = p_now,
        lease_owner = CASE WHEN p_release AND p_terminal THEN '' ELSE lease_owner END,
        lease_expires_at = CASE WHEN p_release AND p_terminal THEN p_now ELSE lease_expires_at END
    WHERE id = p_run AND lease_epoch = p_epoch AND lease_owner <> '' AND lease_expires_at > p_now
      AND last_step = p_step - 1 AND head_response_id = p_response;
    IF NOT FOUND THEN
        SELECT f.o_code, f.o_message, f.o_detail INTO o_code, o_message, o_detail
        FROM superstep_fence_code(p_run, p_epoch, p_step, p_response, p_now) AS f;
        RETURN;
    END IF;
    IF p_fail_at = 'commit.run_updated' THEN
        RAISE EXCEPTION 'injected fault at %', p_fail_at USING ERRCODE = 'SSI01';
    END IF;
    IF v_n = 0 AND p_snapshot IS NULL AND NOT p_terminal THEN
        -- Perhaps nothing the response shows changes: then its row is
        -- left as it is (see the migration's comment). The run's row lock
        -- orders this read with a cancel, which takes it too.
        SELECT next_seq, status = p_status AND error IS NOT DISTINCT FROM p_error AND usage IS NOT DISTINCT FROM p_usage
        INTO o_next_seq, v_same
        FROM responses WHERE id = p_response AND status NOT IN ('completed', 'failed', 'cancelled', 'incomplete');
        IF NOT FOUND THEN
            RAISE EXCEPTION 'response %: events do not continue the log, or the response is final', p_response
                USING ERRCODE = 'SSC01';
        END IF;
    END IF;
    IF NOT v_same THEN
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
    END IF;
    IF p_fail_at = 'commit.response_updated' THEN
        RAISE EXCEPTION 'injected fault at %', p_fail_at USING ERRCODE = 'SSI01';
    END IF;
    IF cardinality(p_ref_hashes) > 0 THEN
        -- One probe of the (run_id, hash) key per part (LATERAL ... LIMIT
        -- 1 keeps the planner from scanning all of the run's blobs, whose
        -- number grows with its history).
        SELECT count(*) INTO v_have FROM unnest(p_ref_hashes) AS u(h),
            LATERAL (SELECT 1 FROM blobs b WHERE b.run_id = p_run AND b.hash = u.h LIMIT 1) AS x;
        IF v_have <> cardinality(p_ref_hashes) THEN
            RAISE EXCEPTION 'run %: referenced checkpoint part missing', p_run USING ERRCODE = 'SSB01';
        END IF;
    END IF;
    -- The previous step always has a checkpoint (commits write one, prune
    -- keeps the last) except step 0 of a run created without one.
    IF p_step = 1 THEN
        IF NOT EXISTS (SELECT 1 FROM checkpoints WHERE run_id = p_run AND step = 0) THEN
            v_parent := -1;
        END IF;
    END IF;
    IF v_n > 0 THEN
        INSERT INTO event_records (response_id, first_seq, last_seq, step, bytes, data)
        VALUES (p_response, p_first, p_first + v_n - 1, p_step, p_bytes, p_data);
    END IF;
    IF cardinality(p_blob_hashes) > 0 THEN
        WITH bl AS (
            INSERT INTO blobs (run_id, hash, size, data)
            SELECT p_run, u.h, octet_length(u.d), u.d FROM unnest(p_blob_hashes, p_blob_data) AS u(h, d)
                LEFT JOIN LATERAL (SELECT 1 AS one FROM blobs b WHERE b.run_id = p_run AND b.hash = u.h LIMIT 1) AS x ON true
            WHERE x.one IS NULL
            RETURNING size)
        SELECT coalesce(sum(size), 0) INTO o_bytes FROM bl;
    END IF;
    INSERT INTO checkpoints (run_id, step, parent_step, part_hashes, size, created_at, manifest)
    VALUES (p_run, p_step, v_parent, p_part_hashes, p_size, p_now, p_manifest);
    IF p_fail_at = 'commit.written' THEN
        RAISE EXCEPTION 'injected fault at %', p_fail_at USING ERRCODE = 'SSI01';
    END IF;
    IF p_journal_prune THEN
        DELETE FROM journal WHERE run_id = p_run AND step <= p_step;
    END IF;
    IF coalesce(p_prune_keep, 0) > 0 THEN
        o_pruned := superstep_prune_checkpoints(p_run, p_prune_keep, p_step);
    END IF;
    IF p_channel <> '' AND (v_n > 0 OR p_terminal) THEN
        PERFORM pg_notify(p_channel, p_response);
    END IF;
END $$;

-- superstep_commit: as in migration 016, but for the call.
CREATE OR REPLACE FUNCTION superstep_commit(p_run text, p_epoch bigint, p_step bigint, p_response text,
    p_first bigint, p_count bigint, p_bytes bigint, p_data bytea,
    p_manifest bytea, p_part_hashes bytea[], p_blob_hashes bytea[], p_blob_data bytea[], p_ref_hashes bytea[], p_size bigint,
    p_status text, p_snapshot bytea, p_error bytea, p_usage bytea,
    p_now timestamptz, p_terminal boolean, p_channel text, p_fail_at text, p_release boolean, p_journal_prune boolean,
    OUT o_next_seq bigint, OUT o_bytes bigint)
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    w record;
BEGIN
    w := superstep_write_step(p_run, p_epoch, p_step, p_response, p_first, p_count, p_bytes, p_data,
        p_manifest, p_part_hashes, p_blob_hashes, p_blob_data, p_ref_hashes, p_size,
        p_status, p_snapshot, p_error, p_usage, p_now, p_terminal, p_release, p_journal_prune, 0, p_channel, p_fail_at);
    IF w.o_code <> '' AND w.o_detail <> '' THEN
        RAISE EXCEPTION USING ERRCODE = w.o_code, MESSAGE = w.o_message, DETAIL = w.o_detail;
    ELSIF w.o_code <> '' THEN
        RAISE EXCEPTION USING ERRCODE = w.o_code, MESSAGE = w.o_message;
    END IF;
    o_next_seq := w.o_next_seq;
    o_bytes := w.o_bytes;
END $$;

-- superstep_commit_batch: as in migration 016, but for the call.
CREATE OR REPLACE FUNCTION superstep_commit_batch(p_runs text[], p_epochs bigint[], p_steps bigint[], p_responses text[],
    p_firsts bigint[], p_counts bigint[], p_bytes bigint[], p_datas bytea[],
    p_sizes bigint[], p_statuses text[], p_snapshots bytea[], p_errors bytea[], p_usages bytea[],
    p_nows timestamptz[], p_terminals boolean[], p_releases boolean[], p_prune_keeps int[], p_journal_prunes boolean[],
    p_manifests bytea[], p_part_lo int[], p_part_hi int[], p_part_hashes bytea[],
    p_blob_lo int[], p_blob_hi int[], p_blob_hashes bytea[], p_blob_datas bytea[],
    p_ref_lo int[], p_ref_hi int[], p_ref_hashes bytea[], p_channel text,
    OUT o_code text, OUT o_message text, OUT o_detail text, OUT o_next_seq bigint, OUT o_bytes bigint, OUT o_pruned bigint)
RETURNS SETOF record
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    v_stmt timestamptz := statement_timestamp();
    w record;
BEGIN
    FOR i IN 1 .. coalesce(cardinality(p_runs), 0) LOOP
        w := superstep_write_step(p_runs[i], p_epochs[i], p_steps[i], p_responses[i],
            p_firsts[i], p_counts[i], p_bytes[i], p_datas[i], p_manifests[i],
            CASE WHEN p_part_hi[i] >= p_part_lo[i] THEN p_part_hashes[p_part_lo[i]:p_part_hi[i]] END,
            p_blob_hashes[p_blob_lo[i]:p_blob_hi[i]], p_blob_datas[p_blob_lo[i]:p_blob_hi[i]],
            p_ref_hashes[p_ref_lo[i]:p_ref_hi[i]], p_sizes[i],
            p_statuses[i], p_snapshots[i], p_errors[i], p_usages[i], coalesce(p_nows[i], v_stmt),
            p_terminals[i], p_releases[i], p_journal_prunes[i], p_prune_keeps[i], p_channel, '');
        o_code := w.o_code;
        o_message := w.o_message;
        o_detail := w.o_detail;
        o_next_seq := coalesce(w.o_next_seq, 0);
        o_bytes := w.o_bytes;
        o_pruned := w.o_pruned;
        RETURN NEXT;
    END LOOP;
END $$;
