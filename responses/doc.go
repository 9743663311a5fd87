// Package responses serves the OpenAI Responses API over net/http on top of
// a host.Host: create (sync, background, streaming), retrieve (poll or
// resume a stream with starting_after), cancel, delete, input_items, plus
// /v1/models, /v1/hosts, /healthz (liveness), /readyz (readiness: the
// store takes a write) and /metrics.
//
// # Wire quirks it honours
//
// Real clients depend on details the spec does not spell out (see
// shared/responses-api.md §0): openai-go sends "stream":true in the body of
// a GET with no Content-Type, so a GET body is read; streaming is decided
// by the stream flag only, never by Accept; include[] and include are both
// accepted; a stream ends with "data: [DONE]" right after its terminal
// event and the handler returns so the body ends; an error after the SSE
// headers went out is an "event: error" frame whose data has both the flat
// fields and a nested "error" object, so every SDK notices it.
//
// # Errors
//
// Every failure reply is {"error":{"message","type","param","code"}} with a
// status chosen by one function, writeError. Bad input is rejected before
// the host is called, so nothing stored changes. A transient store failure
// or a store call past StoreTimeout is a 503 with Retry-After, a stream
// past MaxStreams or MaxStreamsPerKey a 429, a body slower than
// BodyTimeout a 408; 5xx messages never carry the cause, which is logged.
package responses
