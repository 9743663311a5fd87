-- superstep schema version 10: the response's trace context.
-- responses.trace_context: the W3C trace context of the response as the
-- host recorded it at create (traceparent, optionally "\n" tracestate;
-- '' when tracing was off, and for older rows), so that a host resuming
-- the run continues the response's trace. Written by its create, never
-- changed.
ALTER TABLE responses ADD COLUMN trace_context TEXT NOT NULL DEFAULT '';
