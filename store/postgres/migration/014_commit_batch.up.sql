-- 014_commit_batch: superstep_commit_batch writes the commits of a whole
-- group-commit batch in one statement, instead of one superstep_commit
-- per member, each in a SAVEPOINT of its own (a subtransaction: an id, a
-- resource owner and a commit of its own per member). No table changes.
--
-- Member i is run p_runs[i] at epoch p_epochs[i], step p_steps[i],
-- response p_responses[i]: superstep_commit's parameters, one array
-- element per member. Checkpoint parts are flattened over the batch:
-- part k belongs to member p_part_members[k] (in the member's order), and
-- so do the new blobs (p_blob_members) and the parts sent by reference
-- (p_ref_members). A NULL p_nows[i] is the statement's time;
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
    p_part_members int[], p_part_names text[], p_part_hashes bytea[],
    p_blob_members int[], p_blob_hashes bytea[], p_blob_datas bytea[],
    p_ref_members int[], p_ref_hashes bytea[], p_channel text)
RETURNS TABLE (o_code text, o_message text, o_detail text, o_next_seq bigint, o_bytes bigint, o_pruned bigint)
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    v_m int := coalesce(cardinality(p_runs), 0);
    v_stmt timestamptz := statement_timestamp();
    v_ok boolean[] := array_fill(false, ARRAY[v_m]);
    v_codes text[] := array_fill(''::text, ARRAY[v_m]);
    v_msgs text[] := array_fill(''::text, ARRAY[v_m]);
    v_details text[] := array_fill(''::text, ARRAY[v_m]);
    v_next bigint[] := array_fill(0::bigint, ARRAY[v_m]);
    v_stored bigint[];
    v_pruned bigint[] := array_fill(0::bigint, ARRAY[v_m]);
    v_any boolean := false;
    v_refs boolean := coalesce(cardinality(p_ref_members), 0) > 0;
    v_now timestamptz;
    v_n bigint;
    v_seq bigint;
    v_have bigint;
    v_want bigint;
    v_cnt bigint;
    r runs%ROWTYPE;
BEGIN
    FOR i IN 1 .. v_m LOOP
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
                v_codes[i] := 'SSN01';
                v_msgs[i] := format('run %s not found', p_runs[i]);
            ELSIF r.lease_epoch <> p_epochs[i] OR r.lease_owner = '' OR r.lease_expires_at <= v_now THEN
                v_codes[i] := 'SSF01';
                v_msgs[i] := format('run %s fenced', p_runs[i]);
                v_details[i] := r.lease_epoch::text;
            ELSIF r.last_step <> p_steps[i] - 1 THEN
                v_codes[i] := 'SSC01';
                v_msgs[i] := format('run %s: step %s is not the next step (last step %s)', p_runs[i], p_steps[i], r.last_step);
            ELSIF r.head_response_id <> p_responses[i] THEN
                v_codes[i] := 'SSC01';
                v_msgs[i] := format('run %s: response %s is not the head (head %s)', p_runs[i], p_responses[i], r.head_response_id);
            ELSE
                v_codes[i] := 'SSC01';
                v_msgs[i] := format('run %s: concurrent update', p_runs[i]);
            END IF;
            CONTINUE;
        END IF;
        UPDATE responses SET next_seq = next_seq + v_n, commit_step = p_steps[i], status = p_statuses[i],
            snapshot = coalesce(p_snapshots[i], snapshot), error = p_errors[i], usage = p_usages[i],
            completed_at = CASE WHEN p_terminals[i] THEN coalesce(completed_at, v_now) END, updated_at = v_now
        WHERE id = p_responses[i] AND status NOT IN ('completed', 'failed', 'cancelled', 'incomplete')
          AND (v_n = 0 OR next_seq = p_firsts[i])
        RETURNING next_seq INTO v_seq;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'response %: events do not continue the log, or the response is final', p_responses[i]
                USING ERRCODE = 'SSC01';
        END IF;
        v_next[i] := v_seq;
        IF v_refs THEN
            SELECT count(*), count(x.one) INTO v_want, v_have
            FROM unnest(p_ref_members, p_ref_hashes) AS u(m, h)
                LEFT JOIN LATERAL (SELECT 1 AS one FROM blobs b WHERE b.run_id = p_runs[i] AND b.hash = u.h LIMIT 1) AS x ON true
            WHERE u.m = i;
            IF v_have <> v_want THEN
                RAISE EXCEPTION 'run %: referenced checkpoint part missing', p_runs[i] USING ERRCODE = 'SSB01';
            END IF;
        END IF;
        v_ok[i] := true;
        v_any := true;
    END LOOP;

    IF v_any THEN
        -- The written members' event records, new blobs and checkpoint
        -- rows, and their journals, each table in one statement.
        WITH ok AS (SELECT i FROM generate_subscripts(p_runs, 1) AS g(i) WHERE v_ok[i]),
        ev AS (
            INSERT INTO event_records (response_id, first_seq, last_seq, step, bytes, data)
            SELECT p_responses[i], p_firsts[i], p_firsts[i] + p_counts[i] - 1, p_steps[i], p_bytes[i], p_datas[i]
            FROM ok WHERE coalesce(p_counts[i], 0) > 0),
        bl AS (
            INSERT INTO blobs (run_id, hash, size, data)
            SELECT p_runs[u.m], u.h, octet_length(u.d), u.d
            FROM unnest(p_blob_members, p_blob_hashes, p_blob_datas) AS u(m, h, d)
            WHERE v_ok[u.m] AND NOT EXISTS (SELECT 1 FROM blobs b WHERE b.run_id = p_runs[u.m] AND b.hash = u.h)
            RETURNING run_id, size),
        cp AS (
            INSERT INTO checkpoints (run_id, step, parent_step, part_names, part_hashes, size, created_at)
            SELECT p_runs[i], p_steps[i],
                -- The previous step always has a checkpoint (commits write
                -- one, prune keeps the last) except step 0 of a run created
                -- without one.
                CASE WHEN p_steps[i] = 1 AND NOT EXISTS (
                    SELECT 1 FROM checkpoints c WHERE c.run_id = p_runs[i] AND c.step = 0) THEN -1
                ELSE p_steps[i] - 1 END,
                coalesce((SELECT array_agg(u.n ORDER BY u.k) FROM unnest(p_part_members, p_part_names)
                    WITH ORDINALITY AS u(m, n, k) WHERE u.m = ok.i), '{}'),
                coalesce((SELECT array_agg(u.h ORDER BY u.k) FROM unnest(p_part_members, p_part_hashes)
                    WITH ORDINALITY AS u(m, h, k) WHERE u.m = ok.i), '{}'),
                p_sizes[i], coalesce(p_nows[i], v_stmt)
            FROM ok),
        jp AS (
            DELETE FROM journal j USING ok
            WHERE p_journal_prunes[ok.i] AND j.run_id = p_runs[ok.i] AND j.step <= p_steps[ok.i])
        SELECT array_agg((SELECT coalesce(sum(b.size), 0) FROM bl b WHERE b.run_id = p_runs[g.i]) ORDER BY g.i)
        INTO v_stored
        FROM generate_subscripts(p_runs, 1) AS g(i);

        FOR i IN 1 .. v_m LOOP
            CONTINUE WHEN NOT v_ok[i];
            IF coalesce(p_prune_keeps[i], 0) > 0 THEN
                -- CheckpointPrune with KeepLast p_prune_keeps[i], after
                -- the commit (the new checkpoint is the run's last step).
                DELETE FROM checkpoints WHERE run_id = p_runs[i] AND step <> p_steps[i]
                    AND step NOT IN (SELECT c.step FROM checkpoints c WHERE c.run_id = p_runs[i]
                        ORDER BY c.step DESC LIMIT p_prune_keeps[i])
                    AND step NOT IN (SELECT commit_step FROM responses WHERE run_id = p_runs[i]);
                GET DIAGNOSTICS v_cnt = ROW_COUNT;
                v_pruned[i] := v_cnt;
                IF v_cnt > 0 THEN
                    DELETE FROM blobs b WHERE b.run_id = p_runs[i] AND NOT EXISTS (
                        SELECT 1 FROM checkpoints c WHERE c.run_id = p_runs[i] AND b.hash = ANY (c.part_hashes));
                END IF;
            END IF;
            IF p_channel <> '' AND (coalesce(p_counts[i], 0) > 0 OR p_terminals[i]) THEN
                PERFORM pg_notify(p_channel, p_responses[i]);
            END IF;
        END LOOP;
    ELSE
        v_stored := array_fill(0::bigint, ARRAY[v_m]);
    END IF;

    RETURN QUERY SELECT v_codes[g.i], v_msgs[g.i], v_details[g.i], v_next[g.i], v_stored[g.i], v_pruned[g.i]
        FROM generate_subscripts(p_runs, 1) AS g(i) ORDER BY g.i;
END $$;
