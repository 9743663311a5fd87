// Package wire holds the JSON types of the OpenAI Responses API as superstep
// emits them: the Response object (every field of OpenResponses'
// ResponseResource, nullable ones present as null), its output items and
// usage, and the streaming events with their type and sequence_number.
//
// The host builds event payloads here and stores them verbatim in the event
// log; the HTTP layer frames them as SSE without re-encoding.
package wire
