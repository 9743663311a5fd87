package workflow

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
)

// Executor completion in the journal. In a superstep with several
// executors, one that finished before a crash need not run again when the
// superstep re-runs: what it produced (sent messages, outputs, state
// writes, annotations) is journaled when it finishes and re-applied
// instead. Agent executors do it by default (agent.Executor; a ChatAgent
// only in a superstep it shares, see SoloCompletionJournaler); other
// executors opt in with WithCompletionJournal or by implementing
// CompletionJournaler. It costs one journal write per executor per
// superstep, and applies only with a journal (WithJournal).
//
// Not journaled (they run again, as without a journal): executors that
// keep state of their own (Snapshotter, whose state a replay could not
// restore), attempts that requested outside input (RequestInput), and
// attempts whose results do not encode (an annotation of an unregistered
// type). A replayed executor emits no live events: in live mode, what it
// streamed before the crash stays as clients saw it, and the superstep's
// commit closes it with the executor's outputs (a host reconciles the
// re-run with its log; see protocol.LiveFromLog).

// CompletionJournaler is implemented by executors that ask for their
// completion inside a superstep to be journaled (see WithJournal). An
// executor that also implements SoloCompletionJournaler may ask for it
// only in a superstep it shares with other executors.
type CompletionJournaler interface {
	// JournalCompletion reports whether to journal the executor's
	// completion.
	JournalCompletion() bool
}

// SoloCompletionJournaler is implemented by a CompletionJournaler that
// says whether its completion is journaled in a superstep it runs alone.
// There the record guards only the moment between the executor's end and
// the superstep's commit, which follows at once; an executor whose every
// call is journaled on its own (an agent's model and tool calls) is
// re-run from those records at no cost in calls, and is better off
// without a write per superstep that holds all it produced (a hosted
// conversation's whole history, at every turn).
type SoloCompletionJournaler interface {
	CompletionJournaler
	// JournalCompletionAlone reports whether to journal the executor's
	// completion in a superstep where it is the only executor to run.
	JournalCompletionAlone() bool
}

// WithCompletionJournal journals the executor's completion inside a
// superstep, so that a re-run of the superstep after a crash re-applies
// what it did instead of running it again (see CompletionJournaler). Off
// by default: it costs one journal write per superstep the executor runs
// in.
func WithCompletionJournal() ExecutorOption {
	return ExecutorOption{func(e *funcExecutor) { e.completion = true }}
}

// JournalCompletion reports whether WithCompletionJournal was given.
func (e *funcExecutor) JournalCompletion() bool { return e.completion }

// completionRec is a journaled completion.
type completionRec struct {
	Attempt     int               `json:"attempt"`
	Sends       []typedValue      `json:"sends,omitempty"`
	Events      []completionEvent `json:"events,omitempty"`
	Writes      []completionWrite `json:"writes,omitempty"`
	Annotations []completionNote  `json:"annotations,omitempty"`
}

type completionEvent struct {
	Intermediate bool       `json:"intermediate,omitempty"`
	Value        typedValue `json:"value"`
}

type completionWrite struct {
	Key     string     `json:"key"`
	Value   typedValue `json:"value"`
	Deleted bool       `json:"deleted,omitempty"`
}

type completionNote struct {
	Path  []string   `json:"path"`
	Value typedValue `json:"value"`
}

// completionCall returns the journal and the call naming executor id's
// completion in step n, when it is to be journaled: ctx carries a journal
// and ex asks for it (alone: no other executor runs in step n). The
// call's hash covers the messages the executor handles.
func (r *Run) completionCall(ctx context.Context, n int64, id string, ex Executor, alone bool) (Journal, JournalCall, bool) {
	cj, ok := ex.(CompletionJournaler)
	if !ok || !cj.JournalCompletion() {
		return nil, JournalCall{}, false
	}
	if sj, ok := cj.(SoloCompletionJournaler); ok && alone && !sj.JournalCompletionAlone() {
		return nil, JournalCall{}, false
	}
	if _, ok := ex.(Snapshotter); ok {
		return nil, JournalCall{}, false
	}
	j, step, prefix, ok := executorScope(ctx, n, id)
	if !ok {
		return nil, JournalCall{}, false
	}
	h := sha256.New()
	for _, env := range r.st.queues[id] {
		tv, err := encodeValue(env.value)
		if err != nil {
			return nil, JournalCall{}, false
		}
		fmt.Fprintf(h, "%s\x00%s\x00%d\x00", env.source, tv.T, len(tv.V))
		h.Write(tv.V)
	}
	return j, JournalCall{Step: step, Scope: prefix + "@done", Kind: "executor", Name: id,
		Hash: hex.EncodeToString(h.Sum(nil)[:16])}, true
}

// recordCompletion journals what attempt c produced. A result that does
// not encode is not journaled (the executor runs again after a crash);
// a failed journal write is returned.
func recordCompletion(ctx context.Context, j Journal, call JournalCall, c *Context) error {
	buf := c.buf
	if len(buf.requests) > 0 {
		return nil
	}
	rec := completionRec{Attempt: c.attempt}
	for _, s := range buf.sends {
		tv, err := encodeValue(s.value)
		if err != nil {
			return nil
		}
		rec.Sends = append(rec.Sends, tv)
	}
	for _, e := range buf.events {
		var ce completionEvent
		var v any
		switch e := e.(type) {
		case Output:
			v = e.Value
		case Intermediate:
			v, ce.Intermediate = e.Value, true
		default:
			return nil
		}
		tv, err := encodeValue(v)
		if err != nil {
			return nil
		}
		ce.Value = tv
		rec.Events = append(rec.Events, ce)
	}
	for _, key := range buf.order {
		w := buf.writes[key]
		tv, err := encodeValue(w.value)
		if err != nil {
			return nil
		}
		rec.Writes = append(rec.Writes, completionWrite{Key: key, Value: tv, Deleted: w.deleted})
	}
	for _, a := range buf.annotations {
		tv, err := encodeValue(a.Value)
		if err != nil {
			return nil
		}
		rec.Annotations = append(rec.Annotations, completionNote{Path: a.Path, Value: tv})
	}
	var vals []*typedValue
	for i := range rec.Sends {
		vals = append(vals, &rec.Sends[i])
	}
	for i := range rec.Events {
		vals = append(vals, &rec.Events[i].Value)
	}
	for i := range rec.Writes {
		vals = append(vals, &rec.Writes[i].Value)
	}
	for i := range rec.Annotations {
		vals = append(vals, &rec.Annotations[i].Value)
	}
	data, err := marshalSpliced(&rec, vals)
	if err != nil {
		return nil
	}
	if err := j.Record(ctx, call, data); err != nil {
		return fmt.Errorf("workflow: journal executor %q: %w", c.exec, err)
	}
	// The checkpoint takes the encodings the record holds: the value is
	// encoded once, and a re-run that replays the record checkpoints the
	// same bytes (replayCompletion).
	for i, key := range buf.order { // rec.Writes[i] is key's
		if w := buf.writes[key]; !w.deleted {
			w.enc = statePart(rec.Writes[i].Value)
			buf.writes[key] = w
		}
	}
	return nil
}

// replayCompletion rebuilds executor id's result in step n from its
// journaled completion, as execute would have returned it.
func (r *Run) replayCompletion(n int64, id string, data []byte) (execResult, error) {
	var rec completionRec
	if err := json.Unmarshal(data, &rec); err != nil {
		return execResult{}, err
	}
	buf := &attemptBuf{}
	for _, tv := range rec.Sends {
		v, err := decodeValue(tv)
		if err != nil {
			return execResult{}, err
		}
		ds, err := r.wf.route(id, v)
		if err != nil {
			return execResult{}, err
		}
		buf.sends = append(buf.sends, sendRec{value: v, to: ds})
	}
	for _, ce := range rec.Events {
		v, err := decodeValue(ce.Value)
		if err != nil {
			return execResult{}, err
		}
		if ce.Intermediate {
			buf.events = append(buf.events, Intermediate{Step: n, ExecutorID: id, Value: v})
		} else {
			buf.events = append(buf.events, Output{Step: n, ExecutorID: id, Value: v})
		}
	}
	for _, w := range rec.Writes {
		v, err := decodeValue(w.Value)
		if err != nil {
			return execResult{}, err
		}
		if buf.writes == nil {
			buf.writes = map[string]stateWrite{}
		}
		buf.order = append(buf.order, w.Key)
		sw := stateWrite{value: v, deleted: w.Deleted}
		if !w.Deleted {
			sw.enc = statePart(w.Value)
		}
		buf.writes[w.Key] = sw
	}
	for _, a := range rec.Annotations {
		v, err := decodeValue(a.Value)
		if err != nil {
			return execResult{}, err
		}
		buf.annotations = append(buf.annotations, Annotation{ExecutorID: id, Path: a.Path, Value: v})
	}
	attempt := max(rec.Attempt, 1)
	events := make([]Event, 0, len(buf.events)+2)
	events = append(events, ExecutorInvoked{Step: n, ExecutorID: id, Attempt: attempt})
	events = append(events, buf.events...)
	events = append(events, ExecutorCompleted{Step: n, ExecutorID: id, Attempt: attempt})
	return execResult{id: id, events: events, buf: buf}, nil
}
