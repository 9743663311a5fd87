-- 010_trace_context: the response's trace context.
-- responses.trace_context: the W3C trace context of the response as the
-- host recorded it at create (traceparent, optionally "\n" tracestate;
-- '' when tracing was off, and for older rows), so that a host resuming
-- the run continues the response's trace. Written by its create, never
-- changed (no function writes it). A metadata-only change (a constant
-- default).
ALTER TABLE responses ADD COLUMN trace_context text NOT NULL DEFAULT '';
