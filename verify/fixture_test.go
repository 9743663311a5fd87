package verify

import (
	"encoding/json"
	"fmt"

	"github.com/superstep/superstep/store"
)

// run is a hand-built response log for tests: created, in_progress, one
// message item per output, and a terminal event.
type run struct {
	id      string
	outputs []string
	status  string // terminal status; "completed" by default
}

// item returns the wire JSON of output i.
func (r *run) item(i int, status string) map[string]any {
	return map[string]any{
		"id": fmt.Sprintf("msg_%s_%d", r.id, i), "type": "message", "role": "assistant", "status": status,
		"content": []any{map[string]any{"type": "output_text", "text": r.outputs[i], "annotations": []any{}}},
	}
}

// response returns the wire JSON of the response with the first n outputs.
func (r *run) response(status string, n int) map[string]any {
	out := []any{}
	for i := range n {
		out = append(out, r.item(i, "completed"))
	}
	return map[string]any{"id": r.id, "object": "response", "status": status, "output": out}
}

// log builds the event log.
func (r *run) log() []store.Event {
	status := r.status
	if status == "" {
		status = "completed"
	}
	var evs []store.Event
	add := func(typ string, step int64, fields map[string]any) {
		seq := int64(len(evs))
		fields["type"], fields["sequence_number"] = typ, seq
		data, err := json.Marshal(fields)
		if err != nil {
			panic(err)
		}
		evs = append(evs, store.Event{ResponseID: r.id, Seq: seq, Type: typ, Payload: data, Step: step})
	}
	add("response.created", 0, map[string]any{"response": r.response("queued", 0)})
	add("response.in_progress", 1, map[string]any{"response": r.response("in_progress", 0)})
	for i := range r.outputs {
		add("response.output_item.added", int64(i+1), map[string]any{"output_index": i, "item": r.item(i, "in_progress")})
		add("response.output_item.done", int64(i+1), map[string]any{"output_index": i, "item": r.item(i, "completed")})
	}
	add("response."+status, int64(len(r.outputs)+1), map[string]any{"response": r.response(status, len(r.outputs))})
	return evs
}

// record returns the stored response matching the log.
func (r *run) record(log []store.Event) *store.Response {
	status := r.status
	if status == "" {
		status = "completed"
	}
	snap, err := json.Marshal(r.response(status, len(r.outputs)))
	if err != nil {
		panic(err)
	}
	return &store.Response{ID: r.id, Status: store.Status(status), Snapshot: snap, NextSeq: int64(len(log))}
}

// outcome returns the run's expected outcome.
func (r *run) outcome() *Outcome {
	status := r.status
	if status == "" {
		status = "completed"
	}
	return &Outcome{Status: status, Output: append([]string{}, r.outputs...)}
}

// input returns a ResponseInput for the run with a full client, the
// record and the reference.
func (r *run) input() ResponseInput {
	log := r.log()
	return ResponseInput{
		ID: r.id, Log: log, Record: r.record(log), Reference: r.outcome(),
		Clients: []ClientView{{Name: "full", Events: received(log, 0, len(log))}},
	}
}

// received returns what a client received of log[from:to].
func received(log []store.Event, from, to int) []ReceivedEvent {
	var out []ReceivedEvent
	for _, e := range log[from:to] {
		out = append(out, ReceivedEvent{Seq: e.Seq, Type: e.Type, Data: append([]byte(nil), e.Payload...)})
	}
	return out
}

// setPayload replaces a log entry's payload with fields re-encoded.
func setPayload(e *store.Event, edit func(m map[string]any)) {
	var m map[string]any
	if err := json.Unmarshal(e.Payload, &m); err != nil {
		panic(err)
	}
	edit(m)
	data, err := json.Marshal(m)
	if err != nil {
		panic(err)
	}
	e.Payload = data
}
