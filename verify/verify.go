package verify

import (
	"github.com/superstep/superstep/store"
)

// Input is everything Check judges. The caller owns it; Check does not keep
// or modify it.
type Input struct {
	// Responses are checked one by one against their own logs.
	Responses []ResponseInput
	// Journal, when not nil, is checked for re-runs of executors.
	Journal *Journal
}

// ResponseInput is one response: its durable log and what was seen of it.
type ResponseInput struct {
	ID string
	// Log is the response's whole durable event log, in order (see Load).
	Log []store.Event
	// Record, when not nil, is the stored response; its NextSeq, status and
	// snapshot must agree with the log.
	Record *store.Response
	// Clients are the streams clients received for this response.
	Clients []ClientView
	// Reference, when not nil, is the outcome of a crash-free run of the
	// same request; the log's terminal event must carry the same outcome.
	Reference *Outcome
}

// ClientView is what one client received of one response's stream, across
// all its connections, as decoded from SSE.
type ClientView struct {
	Name string
	// StartAt is the first sequence number the client asked for: 0 for a
	// client that streamed from creation or replayed from the start,
	// starting_after+1 for one that joined later.
	StartAt int64
	// Events are the events received, in order, over every connection.
	Events []ReceivedEvent
	// ResumedAt are the starting_after cursors of the client's
	// reconnections, in order; each must be a sequence number the client
	// had received (or StartAt-1).
	ResumedAt []int64
	// Partial means the client stopped on purpose before the terminal
	// event; otherwise its view must reach the end of the log.
	Partial bool
}

// ReceivedEvent is one SSE event as a client decoded it: the payload's
// sequence_number, the event type and the raw data JSON.
type ReceivedEvent struct {
	Seq  int64
	Type string
	Data []byte
}

// Check verifies every invariant over in and returns the report; its Err
// method joins the violations. Check never fails itself: unreadable input
// (a payload that is not JSON, a journal that does not fit) is reported as
// a violation.
func Check(in *Input) *Report {
	rep := &Report{}
	for i := range in.Responses {
		checkResponse(rep, &in.Responses[i])
	}
	if in.Journal != nil {
		checkJournal(rep, in.Journal)
	}
	return rep
}

// checkResponse checks one response's log, record, reference and clients.
func checkResponse(rep *Report, in *ResponseInput) {
	rep.Responses++
	rep.Events += len(in.Log)
	lv := checkLog(rep, in)
	checkOutputKept(rep, in.ID, lv)
	if in.Record != nil {
		checkRecord(rep, in, lv)
	}
	if in.Reference != nil {
		checkReference(rep, in, lv)
	}
	for i := range in.Clients {
		checkClient(rep, in, &in.Clients[i])
	}
}
