-- 006_response_facts: more durable facts of a response, written by its
-- create and never changed (no function writes them: superstep_commit and
-- superstep_append_batch update other columns only).
-- responses.publication: how the response's events reach readers, as the
-- host decided at create ('committed' or 'live'; '' for older rows).
-- responses.input: the response's normalised input items as the host read
-- them at create (opaque JSON; NULL when absent, and for older rows), what
-- recovery re-delivers instead of re-parsing the request.
-- Both are metadata-only changes (a constant default, a NULL column).
ALTER TABLE responses ADD COLUMN publication text NOT NULL DEFAULT '',
    ADD COLUMN input bytea;
