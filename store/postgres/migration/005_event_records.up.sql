-- 005_event_records: one log record per write. A commit, a live append
-- (EventAppend) or a response create stores its events as ONE row of
-- event_records covering the contiguous sequence range first_seq..last_seq,
-- instead of one row (and one primary-key entry) per event: W3 wrote ~1,200
-- event rows per response. Readers slice records by sequence number. data
-- is store/internal/eventrec's encoding (per event: uvarint(len(type)) type
-- uvarint(len(payload)+1) payload, 0 for a NULL payload); step is shared by
-- the record's events; bytes is the sum of their payloads' lengths, so that
-- EventList can bound a page by bytes without reading the records' data.
CREATE TABLE event_records (
    response_id text NOT NULL,
    first_seq   bigint NOT NULL,
    last_seq    bigint NOT NULL, -- inclusive
    step        bigint NOT NULL,
    bytes       bigint NOT NULL,
    data        bytea NOT NULL,
    PRIMARY KEY (response_id, first_seq)
);

-- Each old row becomes a record of one event, encoded here as eventrec
-- would (its TestFormat pins the bytes).
CREATE FUNCTION superstep_uvarint(n bigint) RETURNS bytea LANGUAGE plpgsql IMMUTABLE STRICT AS $$
DECLARE
    b bytea := '\x';
BEGIN
    WHILE n >= 128 LOOP
        b := b || set_byte('\x00'::bytea, 0, ((n & 127) | 128)::int);
        n := n >> 7;
    END LOOP;
    RETURN b || set_byte('\x00'::bytea, 0, n::int);
END $$;

INSERT INTO event_records (response_id, first_seq, last_seq, step, bytes, data)
SELECT response_id, seq, seq, step, coalesce(octet_length(payload), 0),
    superstep_uvarint(octet_length(convert_to(type, 'UTF8'))) || convert_to(type, 'UTF8') ||
    CASE WHEN payload IS NULL THEN '\x00'::bytea ELSE superstep_uvarint(octet_length(payload) + 1) || payload END
FROM events;

DROP FUNCTION superstep_uvarint(bigint);
DROP TABLE events;

-- The hot-path functions take the events as one encoded record. The old
-- ones go (IF EXISTS: tests undo this migration without restoring them);
-- a host of an older build refuses this schema version at Open.
DROP FUNCTION IF EXISTS superstep_commit(text, bigint, bigint, text, bigint[], text[], bytea[], text[], bytea[],
    bytea[], bytea[], bytea[], bigint, text, bytea, bytea, bytea, timestamptz, boolean, text, text);
DROP FUNCTION IF EXISTS superstep_append_batch(text[], bigint[], text[], int[], int[], bigint[], text[], bytea[],
    timestamptz[], text);

-- superstep_commit writes one superstep in the calling transaction (one
-- statement, so one round trip in autocommit mode): the fenced run update,
-- the response update, the events, new blobs and the checkpoint row, plus
-- the notification when p_channel is not empty (NOTIFY serialises
-- committing transactions database-wide, so by default the store notifies
-- after the commit). p_fail_at names a fault point to raise at (tests; ''
-- in production). With p_release and a terminal status, the commit also
-- gives the run's lease up, as LeaseRelease does (owner cleared, lease
-- expired at the commit's time, epoch kept): the commit that finishes a
-- response needs no release write after it (store.CommitParams.Release).
-- A NULL p_snapshot keeps the response's snapshot (a superstep that changed
-- nothing its Response object shows: store.CommitParams.Snapshot nil). Statements are inlined: every nested call or PERFORM
-- costs an executor start on the hot path.
CREATE FUNCTION superstep_commit(p_run text, p_epoch bigint, p_step bigint, p_response text,
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

-- superstep_append_batch appends the live events of several EventAppend
-- calls in one transaction (group commit). Item i names run p_runs[i] at
-- epoch p_epochs[i], response p_responses[i] and its events: p_counts[i]
-- of them from seq p_firsts[i], encoded in p_datas[i] (one record; payload
-- bytes p_bytes[i]). Each item succeeds
-- or fails alone; the result is one row per item: code '' (appended),
-- 'SSN01', 'SSF01' (detail: current epoch) or 'SSC01'. The run row is
-- share-locked, so a concurrent claim waits for the append or fences it.
CREATE FUNCTION superstep_append_batch(p_runs text[], p_epochs bigint[], p_responses text[],
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
            UPDATE responses SET next_seq = next_seq + p_counts[i], updated_at = p_nows[i]
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
