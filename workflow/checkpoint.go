package workflow

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/superstep/superstep/internal/invariants"
)

// checkpointVersion is the header format version.
const checkpointVersion = 1

// Part names.
const (
	partHeader   = "header"
	prefixState  = "state/"
	prefixExec   = "executor/"
	maxPartsSize = 1 << 30
)

// header is the checkpoint's first part. Field order is fixed, so encoding
// is deterministic.
type header struct {
	Version     int           `json:"version"`
	Workflow    string        `json:"workflow"`
	Fingerprint string        `json:"fingerprint"`
	Step        int64         `json:"step"`
	Status      RunStatus     `json:"status"`
	Failure     string        `json:"failure,omitempty"`
	Queues      []queueJSON   `json:"queues"`
	FanIns      [][][]envJSON `json:"fan_ins"`
	Pending     []requestJSON `json:"pending"`
	State       []string      `json:"state"`
	Executors   []string      `json:"executors"`
}

type queueJSON struct {
	Target   string    `json:"target"`
	Messages []envJSON `json:"messages"`
}

type envJSON struct {
	Source  string       `json:"source,omitempty"`
	Value   typedValue   `json:"value"`
	Batch   []typedValue `json:"batch,omitempty"`
	IsBatch bool         `json:"is_batch,omitempty"`
}

type requestJSON struct {
	ID           string     `json:"id"`
	ExecutorID   string     `json:"executor"`
	Payload      typedValue `json:"payload"`
	ResponseType string     `json:"response_type"`
}

// Checkpoint returns the run's state at its last boundary (or as changed
// by Respond since): for example the step-0 checkpoint of a new run.
func (r *Run) Checkpoint() ([]Part, error) { return r.encode(r.st) }

// encode turns st into parts: the header, then one part per state key and
// per executor snapshot, each group sorted by name.
func (r *Run) encode(st *runState) ([]Part, error) {
	h, err := r.header(st)
	if err != nil {
		return nil, err
	}
	data, err := marshalHeader(h)
	if err != nil {
		return nil, fmt.Errorf("workflow: encode checkpoint header: %w", err)
	}
	invariants.Check(slices.IsSorted(h.State) && slices.IsSorted(h.Executors), "workflow: checkpoint part names must be sorted")
	parts := make([]Part, 0, 1+len(h.State)+len(h.Executors))
	parts = append(parts, Part{Name: partHeader, Data: data})
	for _, k := range h.State {
		data, err := st.encodedState(k)
		if err != nil {
			return nil, err
		}
		parts = append(parts, Part{Name: prefixState + k, Data: data})
	}
	for _, id := range h.Executors {
		parts = append(parts, Part{Name: prefixExec + id, Data: st.snaps[id]})
	}
	return parts, nil
}

// minSpliced is the size of encoded values from which marshalHeader
// splices them into the header rather than have json.Marshal copy them.
const minSpliced = 64 << 10

// marshalHeader returns json.Marshal(h), byte for byte, each queued
// value's encoding copied into the result once (marshalSpliced).
func marshalHeader(h *header) ([]byte, error) {
	var vals []*typedValue
	eachEnv := func(envs []envJSON) {
		for i := range envs {
			vals = append(vals, &envs[i].Value)
			for j := range envs[i].Batch {
				vals = append(vals, &envs[i].Batch[j])
			}
		}
	}
	for _, q := range h.Queues {
		eachEnv(q.Messages)
	}
	for _, slots := range h.FanIns {
		for _, envs := range slots {
			eachEnv(envs)
		}
	}
	for i := range h.Pending {
		vals = append(vals, &h.Pending[i].Payload)
	}
	return marshalSpliced(h, vals)
}

// marshalSpliced returns json.Marshal(v), byte for byte, where vals are
// the typed values v holds (all of them), copying each value's encoding
// (typedValue.V) into the result once. Marshal compacts a json.RawMessage
// into its growing buffer and copies the result out: a big value (an 8
// MiB request's text in the start executor's queue, an agent's whole
// conversation in a completion's journal record) was copied three times,
// the buffer grown by doubling. Here, when one value is big, every value
// is replaced by its index, the small rest is marshaled, and each
// "v":<index> is replaced by the value: "v": is written only as a
// typedValue's key (inside a string its quotes would be escaped). The
// values are json.Marshal's own output, compact and escaped as Marshal
// would write them again.
func marshalSpliced(v any, vals []*typedValue) ([]byte, error) {
	vals = slices.DeleteFunc(vals, func(tv *typedValue) bool { return len(tv.V) == 0 })
	if !slices.ContainsFunc(vals, func(tv *typedValue) bool { return len(tv.V) >= minSpliced }) {
		return marshalJSON(v)
	}
	raw := make([]json.RawMessage, len(vals))
	size := 0
	for i, tv := range vals {
		raw[i], size = tv.V, size+len(tv.V)
		tv.V = strconv.AppendInt(nil, int64(i), 10)
	}
	small, err := marshalJSON(v)
	for i, tv := range vals {
		tv.V = raw[i]
	}
	if err != nil {
		return nil, err
	}
	key := []byte(`"v":`)
	out := make([]byte, 0, len(small)+size)
	for rest := small; ; {
		at := bytes.Index(rest, key)
		if at < 0 {
			return append(out, rest...), nil
		}
		at += len(key)
		out = append(out, rest[:at]...)
		rest = rest[at:]
		n := 0
		for n < len(rest) && rest[n] >= '0' && rest[n] <= '9' {
			n++
		}
		i, err := strconv.Atoi(string(rest[:n]))
		if err != nil || i >= len(raw) {
			return nil, fmt.Errorf("workflow: spliced value %q is no index of %d", rest[:min(n+1, len(rest))], len(raw))
		}
		out = append(out, raw[i]...)
		rest = rest[n:]
	}
}

// header builds the header of st's checkpoint.
func (r *Run) header(st *runState) (*header, error) {
	h := &header{Version: checkpointVersion, Workflow: r.wf.name, Fingerprint: r.wf.fingerprint,
		Step: st.step, Status: st.status, Failure: st.failure, Queues: []queueJSON{},
		FanIns: [][][]envJSON{}, Pending: []requestJSON{}, State: sortedKeys(st.state), Executors: sortedKeys(st.snaps)}
	for _, id := range r.wf.order {
		if q := st.queues[id]; len(q) > 0 {
			msgs, err := encodeEnvelopes(q)
			if err != nil {
				return nil, err
			}
			h.Queues = append(h.Queues, queueJSON{Target: id, Messages: msgs})
		}
	}
	for _, slots := range st.fanIn {
		enc := make([][]envJSON, len(slots))
		for j, s := range slots {
			msgs, err := encodeEnvelopes(s)
			if err != nil {
				return nil, err
			}
			enc[j] = msgs
		}
		h.FanIns = append(h.FanIns, enc)
	}
	for _, req := range st.pending {
		rj, err := encodeRequest(req)
		if err != nil {
			return nil, err
		}
		h.Pending = append(h.Pending, rj)
	}
	return h, nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func encodeEnvelopes(q []envelope) ([]envJSON, error) {
	out := make([]envJSON, 0, len(q))
	for _, env := range q {
		ej := envJSON{Source: env.source, IsBatch: env.batch}
		var err error
		if env.batch {
			items, _ := env.value.([]any)
			for _, it := range items {
				tv, err := encodeValue(it)
				if err != nil {
					return nil, err
				}
				ej.Batch = append(ej.Batch, tv)
			}
		} else if ej.Value, err = encodeValue(env.value); err != nil {
			return nil, err
		}
		out = append(out, ej)
	}
	return out, nil
}

func encodeRequest(req Request) (requestJSON, error) {
	p, err := encodeValue(req.Payload)
	if err != nil {
		return requestJSON{}, fmt.Errorf("workflow: request %q payload: %w", req.ID, err)
	}
	rt := "any"
	if req.ResponseType != reflect.TypeFor[any]() {
		name, ok := registeredName(req.ResponseType)
		if !ok {
			return requestJSON{}, fmt.Errorf("workflow: request %q: response type %v: %w", req.ID, req.ResponseType, ErrUnregisteredType)
		}
		rt = name
	}
	return requestJSON{ID: req.ID, ExecutorID: req.ExecutorID, Payload: p, ResponseType: rt}, nil
}

// encodedState returns the part data of state key k: the value's type name,
// a newline, and its JSON. Values are immutable once set, so the bytes are
// cached until the key is written again.
func (st *runState) encodedState(k string) ([]byte, error) {
	if data, ok := st.enc[k]; ok {
		return data, nil
	}
	tv, err := encodeValue(st.state[k])
	if err != nil {
		return nil, fmt.Errorf("workflow: state %q: %w", k, err)
	}
	data := statePart(tv)
	st.enc[k] = data
	return data, nil
}

// statePart is the checkpoint part of a state value encoded as tv: its
// type's name, a newline, its JSON (decodeStatePart reverses it).
func statePart(tv typedValue) []byte {
	data := make([]byte, 0, len(tv.T)+1+len(tv.V))
	return append(append(append(data, tv.T...), '\n'), tv.V...)
}

// decodeStatePart reverses encodedState.
func decodeStatePart(data []byte) (any, error) {
	name, v, ok := bytes.Cut(data, []byte("\n"))
	if !ok || len(name) == 0 {
		return nil, fmt.Errorf("%w: malformed state part", ErrCheckpoint)
	}
	return decodeValue(typedValue{T: string(name), V: v})
}

// checkpointState returns the shared-state values of a checkpoint's parts
// (as made by Checkpoint or given to a CommitFunc) whose key starts with
// keyPrefix, by key, decoded through the type registry; it decodes no
// other part, so reading a few keys of a large checkpoint is cheap. Parts
// of sub-workflows are not included. Errors wrap ErrCheckpoint.
func checkpointState(parts []Part, keyPrefix string) (map[string]any, error) {
	var out map[string]any
	for _, p := range parts {
		key, ok := strings.CutPrefix(p.Name, prefixState)
		if !ok || !strings.HasPrefix(key, keyPrefix) {
			continue
		}
		v, err := decodeStatePart(p.Data)
		if err != nil {
			return nil, fmt.Errorf("workflow: checkpoint part %q: %w", p.Name, err)
		}
		if out == nil {
			out = make(map[string]any)
		}
		out[key] = v
	}
	return out, nil
}

// Restore recreates a run from parts made by Checkpoint or given to a
// CommitFunc, positioned after the last committed superstep. Parts from a
// workflow with another fingerprint, corrupt parts, or parts naming types
// not registered in this process give an error wrapping ErrCheckpoint.
func (w *Workflow) Restore(runID string, parts []Part) (r *Run, err error) {
	defer func() {
		if p := recover(); p != nil { // executor Restore hooks are user code
			r, err = nil, fmt.Errorf("%w: restore panicked: %v", ErrCheckpoint, p)
		}
	}()
	byName := make(map[string][]byte, len(parts))
	for _, p := range parts {
		if _, dup := byName[p.Name]; dup {
			return nil, fmt.Errorf("%w: duplicate part %q", ErrCheckpoint, p.Name)
		}
		byName[p.Name] = p.Data
	}
	h, err := w.decodeHeader(byName[partHeader])
	if err != nil {
		return nil, err
	}
	r = w.newRun(runID)
	if err := r.decodeState(h, byName); err != nil {
		return nil, err
	}
	if want := 1 + len(h.State) + len(h.Executors); want != len(parts) {
		return nil, fmt.Errorf("%w: %d parts, header names %d", ErrCheckpoint, len(parts), want)
	}
	for _, id := range w.order {
		if _, ok := r.executor(id).(Snapshotter); ok {
			if _, ok := r.st.snaps[id]; !ok {
				return nil, fmt.Errorf("%w: no snapshot of executor %q", ErrCheckpoint, id)
			}
			if err := r.restoreExecutor(id); err != nil {
				return nil, fmt.Errorf("%w: %w", ErrCheckpoint, err)
			}
		}
	}
	return r, nil
}

// decodeHeader parses and checks the header part.
func (w *Workflow) decodeHeader(data []byte) (*header, error) {
	if data == nil {
		return nil, fmt.Errorf("%w: no header part", ErrCheckpoint)
	}
	var h header
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&h); err != nil {
		return nil, fmt.Errorf("%w: header: %v", ErrCheckpoint, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: header: trailing data", ErrCheckpoint)
	}
	switch {
	case h.Version != checkpointVersion:
		return nil, fmt.Errorf("%w: version %d, want %d", ErrCheckpoint, h.Version, checkpointVersion)
	case h.Fingerprint != w.fingerprint && h.Fingerprint != w.legacyFingerprint:
		return nil, fmt.Errorf("%w: %w: checkpoint of %q (%s), workflow %q (%s)", ErrCheckpoint, ErrFingerprint, h.Workflow, h.Fingerprint, w.name, w.fingerprint)
	case h.Step < 0:
		return nil, fmt.Errorf("%w: negative step %d", ErrCheckpoint, h.Step)
	case h.Status != Running && h.Status != Idle && h.Status != Completed && h.Status != Failed:
		return nil, fmt.Errorf("%w: unknown status %q", ErrCheckpoint, h.Status)
	case len(h.FanIns) != len(w.fanIns):
		return nil, fmt.Errorf("%w: %d fan-in buffers, workflow has %d", ErrCheckpoint, len(h.FanIns), len(w.fanIns))
	}
	return &h, nil
}

// decodeState fills r.st from the header and the other parts.
func (r *Run) decodeState(h *header, byName map[string][]byte) error {
	st := r.st
	st.step, st.status, st.failure = h.Step, h.Status, h.Failure
	for _, q := range h.Queues {
		if _, ok := r.wf.execs[q.Target]; !ok || len(st.queues[q.Target]) > 0 {
			return fmt.Errorf("%w: queue for unknown or repeated executor %q", ErrCheckpoint, q.Target)
		}
		envs, err := decodeEnvelopes(q.Messages)
		if err != nil {
			return err
		}
		st.queues[q.Target] = envs
	}
	for i, slots := range h.FanIns {
		if len(slots) != len(r.wf.fanIns[i].from) {
			return fmt.Errorf("%w: fan-in %d has %d slots, want %d", ErrCheckpoint, i, len(slots), len(r.wf.fanIns[i].from))
		}
		for j, s := range slots {
			envs, err := decodeEnvelopes(s)
			if err != nil {
				return err
			}
			st.fanIn[i][j] = envs
		}
	}
	for _, rj := range h.Pending {
		req, err := r.decodeRequest(rj)
		if err != nil {
			return err
		}
		st.pending = append(st.pending, req)
	}
	return r.decodeParts(h, byName)
}

// decodeParts decodes the state and executor parts the header names.
func (r *Run) decodeParts(h *header, byName map[string][]byte) error {
	if !slices.IsSorted(h.State) || !slices.IsSorted(h.Executors) {
		return fmt.Errorf("%w: unsorted part lists", ErrCheckpoint)
	}
	for _, k := range h.State {
		data, ok := byName[prefixState+k]
		if !ok {
			return fmt.Errorf("%w: missing state part %q", ErrCheckpoint, k)
		}
		v, err := decodeStatePart(data)
		if err != nil {
			return fmt.Errorf("state %q: %w", k, err)
		}
		r.st.state[k] = v
	}
	for _, id := range h.Executors {
		data, ok := byName[prefixExec+id]
		if _, known := r.executor(id).(Snapshotter); !ok || !known {
			return fmt.Errorf("%w: executor part %q missing or not a Snapshotter", ErrCheckpoint, id)
		}
		r.st.snaps[id] = data
	}
	return nil
}

func decodeEnvelopes(in []envJSON) ([]envelope, error) {
	out := make([]envelope, 0, len(in))
	for _, ej := range in {
		env := envelope{source: ej.Source, batch: ej.IsBatch}
		if ej.IsBatch {
			items := make([]any, 0, len(ej.Batch))
			for _, tv := range ej.Batch {
				v, err := decodeValue(tv)
				if err != nil {
					return nil, err
				}
				items = append(items, v)
			}
			env.value = items
		} else {
			v, err := decodeValue(ej.Value)
			if err != nil {
				return nil, err
			}
			env.value = v
		}
		out = append(out, env)
	}
	return out, nil
}

func (r *Run) decodeRequest(rj requestJSON) (Request, error) {
	if _, ok := r.wf.execs[rj.ExecutorID]; !ok {
		return Request{}, fmt.Errorf("%w: request %q for unknown executor %q", ErrCheckpoint, rj.ID, rj.ExecutorID)
	}
	if rj.ID == "" || slices.ContainsFunc(r.st.pending, func(q Request) bool { return q.ID == rj.ID }) {
		return Request{}, fmt.Errorf("%w: empty or repeated request id %q", ErrCheckpoint, rj.ID)
	}
	p, err := decodeValue(rj.Payload)
	if err != nil {
		return Request{}, err
	}
	rt := reflect.TypeFor[any]()
	if rj.ResponseType != "any" {
		t, ok := typeByName(rj.ResponseType)
		if !ok {
			return Request{}, fmt.Errorf("%w: request %q: unknown response type %q", ErrCheckpoint, rj.ID, rj.ResponseType)
		}
		rt = t
	}
	return Request{ID: rj.ID, ExecutorID: rj.ExecutorID, Payload: p, ResponseType: rt}, nil
}

// partsMagic opens the single-blob form of a checkpoint.
var partsMagic = []byte("SSCKPT1\n")

// JoinParts encodes parts as one blob: a magic prefix, then per part the
// uvarint length of its name, the name, the uvarint length of its data and
// the data. SplitParts reverses it.
func JoinParts(parts []Part) []byte {
	n := len(partsMagic)
	for _, p := range parts {
		n += 2*binary.MaxVarintLen64 + len(p.Name) + len(p.Data)
	}
	buf := make([]byte, 0, n)
	buf = append(buf, partsMagic...)
	for _, p := range parts {
		buf = binary.AppendUvarint(buf, uint64(len(p.Name)))
		buf = append(buf, p.Name...)
		buf = binary.AppendUvarint(buf, uint64(len(p.Data)))
		buf = append(buf, p.Data...)
	}
	return buf
}

// SplitParts decodes a blob made by JoinParts; malformed input gives an
// error wrapping ErrCheckpoint.
func SplitParts(blob []byte) ([]Part, error) {
	rest, ok := bytes.CutPrefix(blob, partsMagic)
	if !ok {
		return nil, fmt.Errorf("%w: bad magic", ErrCheckpoint)
	}
	var parts []Part
	for len(rest) > 0 {
		name, r, err := cutChunk(rest)
		if err != nil {
			return nil, err
		}
		data, r, err := cutChunk(r)
		if err != nil {
			return nil, err
		}
		parts = append(parts, Part{Name: string(name), Data: data})
		rest = r
	}
	return parts, nil
}

// cutChunk splits a uvarint-length-prefixed chunk off b.
func cutChunk(b []byte) (chunk, rest []byte, err error) {
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)-k) || n > maxPartsSize {
		return nil, nil, fmt.Errorf("%w: truncated part", ErrCheckpoint)
	}
	end := k + int(n)
	return slices.Clip(b[k:end]), b[end:], nil
}

// String describes the part for debugging.
func (p Part) String() string {
	return fmt.Sprintf("%s (%d bytes)", p.Name, len(p.Data))
}
