-- superstep schema version 6: more durable facts of a response, written
-- by its create and never changed.
-- responses.publication: how the response's events reach readers, as the
-- host decided at create ("committed" or "live"; '' for older rows).
-- responses.input: the response's normalised input items as the host read
-- them at create (opaque JSON; NULL when absent, and for older rows), what
-- recovery re-delivers instead of re-parsing the request.
ALTER TABLE responses ADD COLUMN publication TEXT NOT NULL DEFAULT '';
ALTER TABLE responses ADD COLUMN input BLOB;
