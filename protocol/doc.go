// Package protocol is the OpenAI Responses API model as superstep speaks it,
// with no I/O: it imports neither the host, the store nor net/http.
//
// It holds the JSON types (the Response object with every field of
// OpenResponses' ResponseResource, nullable ones present as null; output
// items; usage; the streaming events with their type and sequence_number),
// the one reader of create requests and input items (ParseCreate,
// ReadInput, ScanInput), the error object, sequence numbering (Seq), and
// the projector (Projection): a committed superstep in, its frames and the
// next Response snapshot out; a live event in, its frames out. Everything
// here is a pure function of its inputs, so a transcript is a unit test.
//
// The host stores the frames verbatim in the event log; the HTTP layer
// frames them as SSE without re-encoding.
package protocol
