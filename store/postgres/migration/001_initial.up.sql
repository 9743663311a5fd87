-- 001_initial: superstep's tables and the functions of its hot path.
-- Every object is created in the schema named by search_path.

CREATE TABLE runs (
    id               text PRIMARY KEY,
    model            text NOT NULL,
    head_response_id text NOT NULL,
    last_step        bigint NOT NULL DEFAULT 0,
    lease_owner      text NOT NULL DEFAULT '',
    lease_epoch      bigint NOT NULL DEFAULT 0,
    lease_expires_at timestamptz NOT NULL DEFAULT 'epoch',
    active           boolean NOT NULL,
    created_at       timestamptz NOT NULL,
    updated_at       timestamptz NOT NULL
) WITH (fillfactor = 50);
-- runs and responses are updated by every commit: the free space left in
-- their pages keeps those updates HOT (no index entries, cheap pruning).

-- LeaseClaim scans only active runs.
CREATE INDEX runs_claimable ON runs (lease_expires_at) WHERE active;

CREATE TABLE responses (
    ord                  bigserial, -- creation order, unique by construction
    id                   text PRIMARY KEY,
    run_id               text NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    previous_response_id text NOT NULL DEFAULT '',
    model                text NOT NULL,
    owner                text NOT NULL DEFAULT '',
    status               text NOT NULL,
    request              bytea,
    snapshot             bytea,
    error                bytea,
    usage                bytea,
    next_seq             bigint NOT NULL DEFAULT 0,
    commit_step          bigint NOT NULL DEFAULT 0,
    cancel_requested     boolean NOT NULL DEFAULT false,
    created_at           timestamptz NOT NULL,
    updated_at           timestamptz NOT NULL,
    completed_at         timestamptz
) WITH (fillfactor = 50);

CREATE INDEX responses_run ON responses (run_id, ord);

-- events, blobs and checkpoints carry no foreign keys: each key check on
-- the commit path is a locking query per inserted row. The store deletes
-- them with their response or run (ResponseDelete).
CREATE TABLE events (
    response_id text NOT NULL,
    seq         bigint NOT NULL,
    type        text NOT NULL,
    payload     bytea,
    step        bigint NOT NULL,
    PRIMARY KEY (response_id, seq)
);

-- Checkpoint parts are content-addressed per run: a part whose bytes did not
-- change since the parent checkpoint is a reference to the same blob row.
CREATE TABLE blobs (
    run_id text NOT NULL,
    hash   bytea NOT NULL,
    size   bigint NOT NULL,
    data   bytea NOT NULL,
    PRIMARY KEY (run_id, hash)
);

CREATE TABLE checkpoints (
    run_id      text NOT NULL,
    step        bigint NOT NULL,
    parent_step bigint NOT NULL,
    part_names  text[] NOT NULL,
    part_hashes bytea[] NOT NULL,
    size        bigint NOT NULL,
    created_at  timestamptz NOT NULL,
    PRIMARY KEY (run_id, step)
);

-- superstep_fence raises the error that explains why a fenced write to run
-- p_run was refused: SSN01 not found, SSF01 fenced (DETAIL is the current
-- epoch), SSC01 conflict.
CREATE FUNCTION superstep_fence(p_run text, p_epoch bigint, p_step bigint, p_response text, p_now timestamptz)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    r runs%ROWTYPE;
BEGIN
    SELECT * INTO r FROM runs WHERE id = p_run;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'run % not found', p_run USING ERRCODE = 'SSN01';
    END IF;
    IF r.lease_epoch <> p_epoch OR r.lease_owner = '' OR r.lease_expires_at <= p_now THEN
        RAISE EXCEPTION 'run % fenced', p_run USING ERRCODE = 'SSF01', DETAIL = r.lease_epoch::text;
    END IF;
    IF p_step IS NOT NULL AND r.last_step <> p_step - 1 THEN
        RAISE EXCEPTION 'run %: step % is not the next step (last step %)', p_run, p_step, r.last_step
            USING ERRCODE = 'SSC01';
    END IF;
    IF r.head_response_id <> p_response THEN
        RAISE EXCEPTION 'run %: response % is not the head (head %)', p_run, p_response, r.head_response_id
            USING ERRCODE = 'SSC01';
    END IF;
    RAISE EXCEPTION 'run %: concurrent update', p_run USING ERRCODE = 'SSC01';
END $$;

-- superstep_commit writes one superstep in the calling transaction (one
-- statement, so one round trip in autocommit mode): the fenced run update,
-- the response update, the events, new blobs and the checkpoint row, plus
-- the notification when p_channel is not empty (NOTIFY serialises
-- committing transactions database-wide, so by default the store notifies
-- after the commit). p_fail_at names a fault point to raise at (tests; ''
-- in production). Statements are inlined: every nested call or PERFORM
-- costs an executor start on the hot path.
CREATE FUNCTION superstep_commit(p_run text, p_epoch bigint, p_step bigint, p_response text,
    p_seqs bigint[], p_types text[], p_payloads bytea[],
    p_part_names text[], p_part_hashes bytea[], p_blob_hashes bytea[], p_blob_data bytea[],
    p_ref_hashes bytea[], p_size bigint,
    p_status text, p_snapshot bytea, p_error bytea, p_usage bytea,
    p_now timestamptz, p_terminal boolean, p_channel text, p_fail_at text,
    OUT o_next_seq bigint, OUT o_bytes bigint)
LANGUAGE plpgsql
-- Custom plans would re-plan every statement on every call (their cost
-- estimates, knowing the array lengths, always look cheaper than the
-- generic plan's); planning then costs several times the execution.
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    v_n bigint := coalesce(cardinality(p_seqs), 0);
    v_have bigint;
    v_parent bigint := p_step - 1;
BEGIN
    UPDATE runs SET last_step = p_step, active = NOT p_terminal, updated_at = p_now
    WHERE id = p_run AND lease_epoch = p_epoch AND lease_owner <> '' AND lease_expires_at > p_now
      AND last_step = p_step - 1 AND head_response_id = p_response;
    IF NOT FOUND THEN
        PERFORM superstep_fence(p_run, p_epoch, p_step, p_response, p_now);
    END IF;
    IF p_fail_at = 'commit.run_updated' THEN
        RAISE EXCEPTION 'injected fault at %', p_fail_at USING ERRCODE = 'SSI01';
    END IF;
    UPDATE responses SET next_seq = next_seq + v_n, commit_step = p_step, status = p_status,
        snapshot = p_snapshot, error = p_error, usage = p_usage,
        completed_at = CASE WHEN p_terminal THEN coalesce(completed_at, p_now) END, updated_at = p_now
    WHERE id = p_response AND status NOT IN ('completed', 'failed', 'cancelled', 'incomplete')
      AND (v_n = 0 OR next_seq = p_seqs[1])
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
    -- Events, new blobs and the checkpoint row in one statement; the
    -- parts sent by reference (disjoint from the new blobs) must exist.
    -- Every blob lookup goes through the (run_id, hash) key, one probe per
    -- part (LATERAL ... LIMIT 1 keeps the planner from scanning all of the
    -- run's blobs, whose number grows with its history).
    WITH ev AS (
        INSERT INTO events (response_id, seq, type, payload, step)
        SELECT p_response, u.s, u.t, u.p, p_step FROM unnest(p_seqs, p_types, p_payloads) AS u(s, t, p)),
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
-- epoch p_epochs[i], response p_responses[i] and its events
-- p_seqs[p_offsets[i]+1 .. p_offsets[i]+p_counts[i]]. Each item succeeds
-- or fails alone; the result is one row per item: code '' (appended),
-- 'SSN01', 'SSF01' (detail: current epoch) or 'SSC01'. The run row is
-- share-locked, so a concurrent claim waits for the append or fences it.
CREATE FUNCTION superstep_append_batch(p_runs text[], p_epochs bigint[], p_responses text[],
    p_offsets int[], p_counts int[], p_seqs bigint[], p_types text[], p_payloads bytea[],
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
        v_first := p_seqs[p_offsets[i] + 1];
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
                INSERT INTO events (response_id, seq, type, payload, step)
                SELECT p_responses[i], p_seqs[k], p_types[k], p_payloads[k], -1
                FROM generate_series(p_offsets[i] + 1, p_offsets[i] + p_counts[i]) AS k;
                IF p_channel <> '' THEN
                    PERFORM pg_notify(p_channel, p_responses[i]);
                END IF;
            END IF;
        END IF;
        RETURN NEXT;
    END LOOP;
END $$;
