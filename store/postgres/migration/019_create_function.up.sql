-- 019_create_function: the create of a response in a new run is one
-- statement (store/postgres response.go, createNewRun), like a commit:
-- one round trip in autocommit, and one transaction, instead of a
-- transaction of eight round trips (BEGIN, five INSERTs, COMMIT). No
-- table changes.
--
-- superstep_create inserts run p_run headed by response p_response (at
-- step p_base; a fork names the run and step it starts from), the claim
-- of its lease when p_lease_owner is not empty (epoch 1, expiring
-- p_lease_micros after p_now), the response with its first events (one
-- record of p_ev_count events from sequence 0, when any), and, when
-- p_checkpoint, the run's first checkpoint at p_base (its new blobs, the
-- row). It returns the run's row (the store's runColumns, as o_*) and the
-- response's times. A run that exists raises SSC01 (conflict); a response
-- that exists, the unique violation of its key (23505); an error anywhere
-- rolls all of it back. The statements and their order are those of the
-- store's transaction for the other creates (continuations, branches,
-- idempotency keys, conversations), which stays the reference.
CREATE OR REPLACE FUNCTION superstep_create(p_run text, p_response text, p_model text, p_owner text, p_status text,
    p_terminal boolean, p_request bytea, p_snapshot bytea, p_error bytea, p_usage bytea, p_cancel_requested boolean,
    p_publication text, p_input bytea, p_trace_context text, p_created_at timestamptz, p_now timestamptz,
    p_lease_owner text, p_lease_micros bigint, p_base bigint, p_fork_run text, p_fork_step bigint,
    p_ev_count bigint, p_ev_bytes bigint, p_ev_data bytea,
    p_checkpoint boolean, p_manifest bytea, p_part_hashes bytea[], p_blob_hashes bytea[], p_blob_data bytea[], p_size bigint,
    OUT o_id text, OUT o_model text, OUT o_head_response_id text, OUT o_last_step bigint, OUT o_lease_owner text,
    OUT o_lease_epoch bigint, OUT o_lease_expires_at timestamptz, OUT o_active boolean, OUT o_created_at timestamptz,
    OUT o_updated_at timestamptz, OUT o_resume_failures integer, OUT o_resume_error text, OUT o_resume_not_before timestamptz,
    OUT o_resp_created_at timestamptz, OUT o_resp_updated_at timestamptz, OUT o_resp_completed_at timestamptz)
LANGUAGE plpgsql
AS $$
DECLARE
    v_claim boolean := p_lease_owner <> '';
BEGIN
    INSERT INTO runs AS r (id, model, head_response_id, active, lease_owner, lease_epoch, lease_expires_at,
        created_at, updated_at, last_step, forked_from_run, forked_from_step)
    VALUES (p_run, p_model, p_response, NOT p_terminal, p_lease_owner, CASE WHEN v_claim THEN 1 ELSE 0 END,
        CASE WHEN v_claim THEN p_now + p_lease_micros * interval '1 microsecond' ELSE 'epoch'::timestamptz END,
        p_now, p_now, p_base, p_fork_run, p_fork_step)
    ON CONFLICT (id) DO NOTHING
    RETURNING r.id, r.model, r.head_response_id, r.last_step, r.lease_owner, r.lease_epoch, r.lease_expires_at,
        r.active, r.created_at, r.updated_at, r.resume_failures, r.resume_error, r.resume_not_before
    INTO o_id, o_model, o_head_response_id, o_last_step, o_lease_owner, o_lease_epoch, o_lease_expires_at,
        o_active, o_created_at, o_updated_at, o_resume_failures, o_resume_error, o_resume_not_before;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'run % exists; a new response of it must name its head', p_run USING ERRCODE = 'SSC01';
    END IF;
    IF v_claim THEN
        INSERT INTO lease_claims (run_id, epoch, owner, last_step, claimed_at)
        VALUES (p_run, o_lease_epoch, p_lease_owner, o_last_step, o_updated_at);
    END IF;
    INSERT INTO responses (id, run_id, previous_response_id, model, owner, status, request, snapshot, error, usage,
        next_seq, commit_step, start_step, publication, input, cancel_requested, created_at, updated_at, completed_at,
        trace_context)
    VALUES (p_response, p_run, '', p_model, p_owner, p_status, p_request, p_snapshot, p_error, p_usage,
        p_ev_count, o_last_step, o_last_step, p_publication, p_input, p_cancel_requested, coalesce(p_created_at, p_now),
        p_now, CASE WHEN p_terminal THEN p_now END, p_trace_context)
    RETURNING created_at, updated_at, completed_at INTO o_resp_created_at, o_resp_updated_at, o_resp_completed_at;
    IF p_ev_count > 0 THEN
        INSERT INTO event_records (response_id, first_seq, last_seq, step, bytes, data)
        VALUES (p_response, 0, p_ev_count - 1, 0, p_ev_bytes, p_ev_data);
    END IF;
    IF p_checkpoint THEN
        IF cardinality(p_blob_hashes) > 0 THEN
            INSERT INTO blobs (run_id, hash, size, data)
            SELECT p_run, u.h, octet_length(u.d), u.d FROM unnest(p_blob_hashes, p_blob_data) AS u(h, d)
            ON CONFLICT DO NOTHING;
        END IF;
        INSERT INTO checkpoints (run_id, step, parent_step, manifest, part_hashes, size, created_at)
        VALUES (p_run, o_last_step, -1, p_manifest, p_part_hashes, p_size, p_now);
    END IF;
END $$;
