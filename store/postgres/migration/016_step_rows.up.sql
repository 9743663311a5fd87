-- 016_step_rows: a superstep writes only what changed (issue 14).
--
-- checkpoints.manifest lists a checkpoint's parts in order (store/postgres
-- parts.go, encodeManifest): per part its name and either its bytes,
-- inline, or a reference to the next element of part_hashes, a blob row
-- as before. A small part that changed since the parent checkpoint is
-- inline, so the step that changes it writes no blob row and no blob index
-- entry. Rows written before have no manifest: part_names and part_hashes
-- list every part, each a blob, and read as they did. In both, part_hashes
-- holds the hashes of the row's blob parts (NULL for none), which is all
-- that blob GC (b.hash = ANY (c.part_hashes)) reads; part_names is NULL
-- in manifest rows. Metadata-only changes.
ALTER TABLE checkpoints ADD COLUMN manifest bytea,
    ALTER COLUMN part_names DROP NOT NULL,
    ALTER COLUMN part_hashes DROP NOT NULL;

-- A commit that changes nothing its response shows (no events; snapshot,
-- status, error and usage as they are) no longer rewrites the response's
-- row (~1.3 KB of WAL for commit_step and updated_at). So the row of an
-- unfinished response (completed_at NULL: its run's head, before its
-- terminal commit) may be behind: its CommitStep is its run's last_step,
-- and its UpdatedAt is the time of the run's last commit (the created_at
-- of the checkpoint at last_step) when that commit came after the row's
-- last write, that is when the stored commit_step is below last_step.
-- Every write of an unfinished response's row stores the run's last_step
-- as commit_step (the commit, superstep_append_batch below, the store's
-- cancel), so the stored values stay exact for finished responses and
-- for rows no such commit passed. The store reads them so (responseColumns).

-- superstep_fence_code classifies a fenced write to run p_run that matched
-- no row: o_code SSN01 (not found), SSF01 (fenced; o_detail the current
-- epoch) or SSC01 (conflict), with its message: superstep_write_step
-- returns it, superstep_commit raises it. (superstep_append_batch, for
-- live appends, still holds its own copy of these rules.)
CREATE FUNCTION superstep_fence_code(p_run text, p_epoch bigint, p_step bigint, p_response text, p_now timestamptz,
    OUT o_code text, OUT o_message text, OUT o_detail text)
LANGUAGE plpgsql AS $$
DECLARE
    r runs%ROWTYPE;
BEGIN
    o_detail := '';
    SELECT * INTO r FROM runs WHERE id = p_run;
    IF NOT FOUND THEN
        o_code := 'SSN01';
        o_message := format('run %s not found', p_run);
    ELSIF r.lease_epoch <> p_epoch OR r.lease_owner = '' OR r.lease_expires_at <= p_now THEN
        o_code := 'SSF01';
        o_message := format('run %s fenced', p_run);
        o_detail := r.lease_epoch::text;
    ELSIF p_step IS NOT NULL AND r.last_step <> p_step - 1 THEN
        o_code := 'SSC01';
        o_message := format('run %s: step %s is not the next step (last step %s)', p_run, p_step, r.last_step);
    ELSIF r.head_response_id <> p_response THEN
        o_code := 'SSC01';
        o_message := format('run %s: response %s is not the head (head %s)', p_run, p_response, r.head_response_id);
    ELSE
        o_code := 'SSC01';
        o_message := format('run %s: concurrent update', p_run);
    END IF;
END $$;

-- superstep_fence (001) is called by nothing from here on: the commit
-- functions below classify with superstep_fence_code.
DROP FUNCTION superstep_fence(text, bigint, bigint, text, timestamptz);

-- superstep_prune_checkpoints deletes run p_run's checkpoints but the
-- newest p_keep, the one at p_last (the run's last step) and those a
-- finished response resumes from (its commit_step; an unfinished one's is
-- p_last), then the blobs no remaining checkpoint references, and returns
-- how many checkpoints it deleted (CheckpointPrune). The caller holds the
-- run's row lock.
CREATE FUNCTION superstep_prune_checkpoints(p_run text, p_keep int, p_last bigint) RETURNS bigint
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    v_cnt bigint;
BEGIN
    DELETE FROM checkpoints WHERE run_id = p_run AND step <> p_last
        AND step NOT IN (SELECT c.step FROM checkpoints c WHERE c.run_id = p_run ORDER BY c.step DESC LIMIT p_keep)
        AND step NOT IN (SELECT commit_step FROM responses WHERE run_id = p_run AND completed_at IS NOT NULL);
    GET DIAGNOSTICS v_cnt = ROW_COUNT;
    IF v_cnt > 0 THEN
        DELETE FROM blobs b WHERE b.run_id = p_run AND NOT EXISTS (
            SELECT 1 FROM checkpoints c WHERE c.run_id = p_run AND b.hash = ANY (c.part_hashes));
    END IF;
    RETURN v_cnt;
END $$;

-- superstep_write_step writes one superstep, the body shared by
-- superstep_commit (one commit) and superstep_commit_batch (a member of
-- a batch): the fenced run update (with p_release and a terminal status
-- it gives the lease up, store.CommitParams.Release), the response update
-- unless the commit changes nothing it shows, the event record of p_count
-- events from p_first, the new blobs (inserted unless the run stores them:
-- its row is locked first, and only writers holding that lock add blobs
-- to a run, so NOT EXISTS is exact and spares ON CONFLICT's speculative
-- insertion record), the checkpoint row (p_manifest, p_part_hashes), and
-- with p_journal_prune and p_prune_keep > 0 the journal and checkpoint
-- prunes (CommitParams.JournalPrune, PruneKeep). The parts sent by
-- reference (p_ref_hashes, disjoint from the new blobs) must exist.
--
-- A fenced commit, or one that does not follow its run, writes nothing
-- and returns superstep_fence_code's o_code and o_message (o_detail);
-- o_code '' is written, with o_next_seq, o_bytes (blob bytes stored) and
-- o_pruned. The rarer refusals, found after the run row was written (the
-- response final or the events not continuing its log: SSC01; a part sent
-- by reference missing: SSB01), raise. p_fail_at names a fault point to
-- raise at (tests; '' in production).
CREATE FUNCTION superstep_write_step(p_run text, p_epoch bigint, p_step bigint, p_response text,
    p_first bigint, p_count bigint, p_bytes bigint, p_data bytea,
    p_manifest bytea, p_part_hashes bytea[], p_blob_hashes bytea[], p_blob_data bytea[], p_ref_hashes bytea[], p_size bigint,
    p_status text, p_snapshot bytea, p_error bytea, p_usage bytea,
    p_now timestamptz, p_terminal boolean, p_release boolean, p_journal_prune boolean, p_prune_keep int,
    p_channel text, p_fail_at text,
    OUT o_code text, OUT o_message text, OUT o_detail text, OUT o_next_seq bigint, OUT o_bytes bigint, OUT o_pruned bigint)
LANGUAGE plpgsql
-- Custom plans would re-plan every statement on every call (their cost
-- estimates, knowing the array lengths, always look cheaper than the
-- generic plan's); planning then costs several times the execution.
SET plan_cache_mode = force_generic_plan
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
    IF p_step = 1 AND NOT EXISTS (SELECT 1 FROM checkpoints WHERE run_id = p_run AND step = 0) THEN
        v_parent := -1;
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

-- superstep_commit writes one superstep (superstep_write_step) in the
-- calling transaction, one statement: one round trip in autocommit mode.
-- A fenced commit raises what superstep_fence would. With p_channel not
-- empty it notifies (NOTIFY serialises committing transactions
-- database-wide, so by default the store notifies after the commit).
DROP FUNCTION superstep_commit(text, bigint, bigint, text, bigint, bigint, bigint, bytea, text[], bytea[], bytea[],
    bytea[], bytea[], bigint, text, bytea, bytea, bytea, timestamptz, boolean, text, text, boolean);
CREATE FUNCTION superstep_commit(p_run text, p_epoch bigint, p_step bigint, p_response text,
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
    SELECT * INTO w FROM superstep_write_step(p_run, p_epoch, p_step, p_response, p_first, p_count, p_bytes, p_data,
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

-- superstep_commit_batch writes the commits of a group-commit batch in one
-- statement (migration 014 has the why): member i is run p_runs[i] and
-- the i-th element of every other array; its checkpoint's blob hashes
-- are p_part_hashes[p_part_lo[i]:p_part_hi[i]], its new blobs
-- p_blob_hashes[p_blob_lo[i]:p_blob_hi[i]] (and data), the parts it sends
-- by reference p_ref_hashes[p_ref_lo[i]:p_ref_hi[i]] (an empty range when
-- hi < lo); a NULL p_nows[i] is the statement's time. One row per member,
-- in order: superstep_write_step's result. A member that is fenced fails
-- alone; a refusal that raises undoes the statement, and the store writes
-- the batch again member by member, in savepoints. The caller passes each
-- run once, in run order (rows are locked in that order).
DROP FUNCTION superstep_commit_batch(text[], bigint[], bigint[], text[], bigint[], bigint[], bigint[], bytea[],
    bigint[], text[], bytea[], bytea[], bytea[], timestamptz[], boolean[], boolean[], int[], boolean[],
    int[], int[], text[], bytea[], int[], int[], bytea[], bytea[], int[], int[], bytea[], text);
CREATE FUNCTION superstep_commit_batch(p_runs text[], p_epochs bigint[], p_steps bigint[], p_responses text[],
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
        SELECT * INTO w FROM superstep_write_step(p_runs[i], p_epochs[i], p_steps[i], p_responses[i],
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

-- superstep_append_batch (migration 005): unchanged but that an append
-- stores the run's last_step as the response's commit_step (see above).
CREATE OR REPLACE FUNCTION superstep_append_batch(p_runs text[], p_epochs bigint[], p_responses text[],
    p_firsts bigint[], p_counts int[], p_bytes bigint[], p_datas bytea[],
    p_nows timestamptz[], p_channel text)
RETURNS TABLE (o_code text, o_detail text) LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    r runs%ROWTYPE;
    v_first bigint;
BEGIN
    FOR i IN 1 .. coalesce(cardinality(p_runs), 0) LOOP
        o_code := '';
        o_detail := '';
        v_first := p_firsts[i];
        SELECT * INTO r FROM runs WHERE id = p_runs[i] FOR SHARE;
        IF NOT FOUND THEN
            o_code := 'SSN01';
            o_detail := 'run ' || p_runs[i] || ' not found';
        ELSIF r.lease_epoch <> p_epochs[i] OR r.lease_owner = '' OR r.lease_expires_at <= p_nows[i] THEN
            o_code := 'SSF01';
            o_detail := r.lease_epoch::text;
        ELSIF r.head_response_id <> p_responses[i] THEN
            o_code := 'SSC01';
            o_detail := 'response ' || p_responses[i] || ' is not the head of run ' || p_runs[i];
        ELSE
            UPDATE responses SET next_seq = next_seq + p_counts[i], updated_at = p_nows[i], commit_step = r.last_step
            WHERE id = p_responses[i] AND status NOT IN ('completed', 'failed', 'cancelled', 'incomplete')
              AND next_seq = v_first;
            IF NOT FOUND THEN
                o_code := 'SSC01';
                o_detail := 'response ' || p_responses[i] || ': events do not continue the log, or the response is final';
            ELSE
                INSERT INTO event_records (response_id, first_seq, last_seq, step, bytes, data)
                VALUES (p_responses[i], v_first, v_first + p_counts[i] - 1, -1, p_bytes[i], p_datas[i]);
                IF p_channel <> '' THEN
                    PERFORM pg_notify(p_channel, p_responses[i]);
                END IF;
            END IF;
        END IF;
        RETURN NEXT;
    END LOOP;
END $$;
