package workflow

import (
	"maps"
	"slices"
)

// runState is a run's state at a superstep boundary. A superstep never
// mutates it: it builds the next one, which replaces it after the commit.
type runState struct {
	step    int64
	status  RunStatus
	failure string // the failure's message when status is Failed
	queues  map[string][]envelope
	fanIn   [][][]envelope // [fan-in edge][source slot] buffered messages
	state   map[string]any
	pending []Request
	snaps   map[string][]byte // snapshots of Snapshotter executors
	enc     map[string][]byte // encoded state parts, valid until the key is written
}

// envelope is a queued message and the executor that sent it ("" for the
// run's input and answers). A fan-in delivery carries its messages in batch.
type envelope struct {
	source string
	value  any
	batch  bool // value is a []any delivered by a fan-in edge
}

// newRunState returns the empty state of a run of w.
func newRunState(w *Workflow) *runState {
	st := &runState{status: Running, queues: map[string][]envelope{}, state: map[string]any{}, snaps: map[string][]byte{}, enc: map[string][]byte{}}
	st.fanIn = make([][][]envelope, len(w.fanIns))
	for i, e := range w.fanIns {
		st.fanIn[i] = make([][]envelope, len(e.from))
	}
	return st
}

// clone returns a copy that can be changed without affecting st (the
// messages and values themselves are shared; they are never mutated).
func (st *runState) clone() *runState {
	n := *st
	n.queues = make(map[string][]envelope, len(st.queues))
	for k, q := range st.queues {
		n.queues[k] = slices.Clone(q)
	}
	n.fanIn = make([][][]envelope, len(st.fanIn))
	for i, slots := range st.fanIn {
		n.fanIn[i] = make([][]envelope, len(slots))
		for j, s := range slots {
			n.fanIn[i][j] = slices.Clone(s)
		}
	}
	n.state = maps.Clone(st.state)
	n.pending = slices.Clone(st.pending)
	n.snaps = maps.Clone(st.snaps)
	n.enc = maps.Clone(st.enc)
	return &n
}

// enqueue appends env to target's queue.
func (st *runState) enqueue(target string, env envelope) {
	st.queues[target] = append(st.queues[target], env)
}

// hasMessages reports whether any executor has queued messages.
func (st *runState) hasMessages() bool {
	for _, q := range st.queues {
		if len(q) > 0 {
			return true
		}
	}
	return false
}

// settle sets the status from what is queued and pending.
func (st *runState) settle() {
	switch {
	case st.hasMessages():
		st.status = Running
	case len(st.pending) > 0:
		st.status = Idle
	default:
		st.status = Completed
	}
}

// releaseFanIns moves every complete fan-in buffer (each source has sent)
// into its target's queue as one batch.
func (st *runState) releaseFanIns(w *Workflow) {
	for i, e := range w.fanIns {
		slots := st.fanIn[i]
		if slices.ContainsFunc(slots, func(s []envelope) bool { return len(s) == 0 }) {
			continue
		}
		var batch []any
		for j := range slots {
			for _, env := range slots[j] {
				batch = append(batch, env.value)
			}
			slots[j] = nil
		}
		st.enqueue(e.to[0], envelope{source: e.id, value: batch, batch: true})
	}
}
