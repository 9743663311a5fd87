-- 014_commit_batch: superstep_commit_batch writes the commits of a whole
-- group-commit batch in one statement, instead of one superstep_commit
-- per member, each in a SAVEPOINT of its own (a subtransaction: an id, a
-- resource owner and a commit of its own per member). No table changes.
--
-- Member i is run p_runs[i] at epoch p_epochs[i], step p_steps[i],
-- response p_responses[i]: superstep_commit's parameters, one array
-- element per member. Checkpoint parts are concatenated over the batch:
-- member i's are p_part_names[p_part_lo[i]:p_part_hi[i]] (and hashes),
-- its new blobs p_blob_hashes[p_blob_lo[i]:p_blob_hi[i]] (and data), the
-- parts it sends by reference p_ref_hashes[p_ref_lo[i]:p_ref_hi[i]] (an
-- empty range when hi < lo). A NULL p_nows[i] is the statement's time;
-- p_prune_keeps[i] > 0 also prunes the run's checkpoints as
-- CheckpointPrune (store.CommitParams.PruneKeep) and p_journal_prunes[i]
-- deletes the run's journal up to the step (CommitParams.JournalPrune),
-- both in this statement.
--
-- Result: one row per member, in order. A member that is fenced or does
-- not follow the run (superstep_fence's cases) fails alone: o_code is the
-- SQLSTATE superstep_fence would raise (SSN01, SSF01 with the current
-- epoch as o_detail, SSC01) with its message, and nothing of it is
-- written; the others are. o_code '' is written, with o_next_seq,
-- o_bytes (blob bytes stored) and o_pruned (checkpoints pruned).
--
-- Each member is written by the statements superstep_commit runs, in a
-- loop (statements per table over the whole batch cost more to start than
-- they save at the batch sizes group commit sees).
--
-- Rarer refusals, found after the member's run row was written (its
-- response final or its events not continuing the log; a part sent by
-- reference missing), raise as superstep_commit does: the statement is
-- undone as a whole and the store writes the batch again member by
-- member, in savepoints, where each fails alone. Nothing is written
-- twice: the run update comes first and is the fence, as in
-- superstep_commit, and needs no row lock of its own beforehand.
--
-- The caller passes each run once, in run order (rows are locked in that
-- order, as the savepoint path and the lease renewals lock them). A new
-- blob is inserted unless the run already stores it: the run's row is
-- locked (updated) first, and only writers holding that lock add blobs
-- to a run, so NOT EXISTS is exact here and spares the speculative
-- insertion (and its WAL record) of ON CONFLICT.
CREATE FUNCTION superstep_commit_batch(p_runs text[], p_epochs bigint[], p_steps bigint[], p_responses text[],
    p_firsts bigint[], p_counts bigint[], p_bytes bigint[], p_datas bytea[],
    p_sizes bigint[], p_statuses text[], p_snapshots bytea[], p_errors bytea[], p_usages bytea[],
    p_nows timestamptz[], p_terminals boolean[], p_releases boolean[], p_prune_keeps int[], p_journal_prunes boolean[],
    p_part_lo int[], p_part_hi int[], p_part_names text[], p_part_hashes bytea[],
    p_blob_lo int[], p_blob_hi int[], p_blob_hashes bytea[], p_blob_datas bytea[],
    p_ref_lo int[], p_ref_hi int[], p_ref_hashes bytea[], p_channel text,
    OUT o_code text, OUT o_message text, OUT o_detail text, OUT o_next_seq bigint, OUT o_bytes bigint, OUT o_pruned bigint)
RETURNS SETOF record
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    v_stmt timestamptz := statement_timestamp();
    v_now timestamptz;
    v_n bigint;
    v_parent bigint;
    v_have bigint;
    v_cnt bigint;
    r runs%ROWTYPE;
BEGIN
    FOR i IN 1 .. coalesce(cardinality(p_runs), 0) LOOP
        o_code := '';
        o_message := '';
        o_detail := '';
        o_next_seq := 0;
        o_bytes := 0;
        o_pruned := 0;
        v_now := coalesce(p_nows[i], v_stmt);
        v_n := coalesce(p_counts[i], 0);
        UPDATE runs SET last_step = p_steps[i], active = NOT p_terminals[i], updated_at = v_now,
            lease_owner = CASE WHEN p_releases[i] AND p_terminals[i] THEN '' ELSE lease_owner END,
            lease_expires_at = CASE WHEN p_releases[i] AND p_terminals[i] THEN v_now ELSE lease_expires_at END
        WHERE id = p_runs[i] AND lease_epoch = p_epochs[i] AND lease_owner <> '' AND lease_expires_at > v_now
          AND last_step = p_steps[i] - 1 AND head_response_id = p_responses[i];
        IF NOT FOUND THEN
            -- superstep_fence's cases, as a code instead of an exception.
            SELECT * INTO r FROM runs WHERE id = p_runs[i];
            IF NOT FOUND THEN
                o_code := 'SSN01';
                o_message := format('run %s not found', p_runs[i]);
            ELSIF r.lease_epoch <> p_epochs[i] OR r.lease_owner = '' OR r.lease_expires_at <= v_now THEN
                o_code := 'SSF01';
                o_message := format('run %s fenced', p_runs[i]);
                o_detail := r.lease_epoch::text;
            ELSIF r.last_step <> p_steps[i] - 1 THEN
                o_code := 'SSC01';
                o_message := format('run %s: step %s is not the next step (last step %s)', p_runs[i], p_steps[i], r.last_step);
            ELSIF r.head_response_id <> p_responses[i] THEN
                o_code := 'SSC01';
                o_message := format('run %s: response %s is not the head (head %s)', p_runs[i], p_responses[i], r.head_response_id);
            ELSE
                o_code := 'SSC01';
                o_message := format('run %s: concurrent update', p_runs[i]);
            END IF;
            RETURN NEXT;
            CONTINUE;
        END IF;
        UPDATE responses SET next_seq = next_seq + v_n, commit_step = p_steps[i], status = p_statuses[i],
            snapshot = coalesce(p_snapshots[i], snapshot), error = p_errors[i], usage = p_usages[i],
            completed_at = CASE WHEN p_terminals[i] THEN coalesce(completed_at, v_now) END, updated_at = v_now
        WHERE id = p_responses[i] AND status NOT IN ('completed', 'failed', 'cancelled', 'incomplete')
          AND (v_n = 0 OR next_seq = p_firsts[i])
        RETURNING next_seq INTO o_next_seq;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'response %: events do not continue the log, or the response is final', p_responses[i]
                USING ERRCODE = 'SSC01';
        END IF;
        IF p_ref_hi[i] >= p_ref_lo[i] THEN
            -- One probe of the (run_id, hash) key per part.
            SELECT count(*) INTO v_have FROM unnest(p_ref_hashes[p_ref_lo[i]:p_ref_hi[i]]) AS u(h),
                LATERAL (SELECT 1 FROM blobs b WHERE b.run_id = p_runs[i] AND b.hash = u.h LIMIT 1) AS x;
            IF v_have <> p_ref_hi[i] - p_ref_lo[i] + 1 THEN
                RAISE EXCEPTION 'run %: referenced checkpoint part missing', p_runs[i] USING ERRCODE = 'SSB01';
            END IF;
        END IF;
        -- The previous step always has a checkpoint (commits write one,
        -- prune keeps the last) except step 0 of a run created without one.
        v_parent := p_steps[i] - 1;
        IF p_steps[i] = 1 AND NOT EXISTS (SELECT 1 FROM checkpoints WHERE run_id = p_runs[i] AND step = 0) THEN
            v_parent := -1;
        END IF;
        IF v_n > 0 THEN
            INSERT INTO event_records (response_id, first_seq, last_seq, step, bytes, data)
            VALUES (p_responses[i], p_firsts[i], p_firsts[i] + v_n - 1, p_steps[i], p_bytes[i], p_datas[i]);
        END IF;
        IF p_blob_hi[i] >= p_blob_lo[i] THEN
            WITH bl AS (
                INSERT INTO blobs (run_id, hash, size, data)
                SELECT p_runs[i], u.h, octet_length(u.d), u.d
                FROM unnest(p_blob_hashes[p_blob_lo[i]:p_blob_hi[i]], p_blob_datas[p_blob_lo[i]:p_blob_hi[i]]) AS u(h, d)
                    LEFT JOIN LATERAL (SELECT 1 AS one FROM blobs b
                        WHERE b.run_id = p_runs[i] AND b.hash = u.h LIMIT 1) AS x ON true
                WHERE x.one IS NULL
                RETURNING size)
            SELECT coalesce(sum(size), 0) INTO o_bytes FROM bl;
        END IF;
        INSERT INTO checkpoints (run_id, step, parent_step, part_names, part_hashes, size, created_at)
        VALUES (p_runs[i], p_steps[i], v_parent, coalesce(p_part_names[p_part_lo[i]:p_part_hi[i]], '{}'),
            coalesce(p_part_hashes[p_part_lo[i]:p_part_hi[i]], '{}'), p_sizes[i], v_now);
        IF p_journal_prunes[i] THEN
            DELETE FROM journal WHERE run_id = p_runs[i] AND step <= p_steps[i];
        END IF;
        IF coalesce(p_prune_keeps[i], 0) > 0 THEN
            -- CheckpointPrune with KeepLast p_prune_keeps[i], after the
            -- commit (the new checkpoint is the run's last step).
            DELETE FROM checkpoints WHERE run_id = p_runs[i] AND step <> p_steps[i]
                AND step NOT IN (SELECT c.step FROM checkpoints c WHERE c.run_id = p_runs[i]
                    ORDER BY c.step DESC LIMIT p_prune_keeps[i])
                AND step NOT IN (SELECT commit_step FROM responses WHERE run_id = p_runs[i]);
            GET DIAGNOSTICS v_cnt = ROW_COUNT;
            o_pruned := v_cnt;
            IF v_cnt > 0 THEN
                DELETE FROM blobs b WHERE b.run_id = p_runs[i] AND NOT EXISTS (
                    SELECT 1 FROM checkpoints c WHERE c.run_id = p_runs[i] AND b.hash = ANY (c.part_hashes));
            END IF;
        END IF;
        IF p_channel <> '' AND (v_n > 0 OR p_terminals[i]) THEN
            PERFORM pg_notify(p_channel, p_responses[i]);
        END IF;
        RETURN NEXT;
    END LOOP;
END $$;

-- superstep_commit (migration 005) inserts a new blob unless the run
-- already stores it by the same probe of the (run_id, hash) key instead of
-- ON CONFLICT DO NOTHING, for the reason above: a speculative insertion
-- writes a second WAL record (HEAP_CONFIRM, 48 bytes) for every blob.
-- Otherwise unchanged.
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
            LEFT JOIN LATERAL (SELECT 1 AS one FROM blobs b WHERE b.run_id = p_run AND b.hash = u.h LIMIT 1) AS x ON true
        WHERE x.one IS NULL
        RETURNING size),
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
