package host

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/superstep/superstep/internal/wait"
	"github.com/superstep/superstep/store"
	"github.com/superstep/superstep/workflow"
)

// The journal inside the superstep (DESIGN §2.7). A run driven here gives
// its workflow a runJournal (workflow.WithJournal): every model call, tool
// call and workflow.RunStep of its executors that finishes is appended to
// the run's journal in the store (store.Journal: one write per call,
// fenced by the run's epoch) before the executor uses its result. When the
// superstep runs again after a crash (here or on another host), the calls
// are answered from the journal in order; only the call that was in
// flight is made again. The commit of the step deletes its journal in the
// commit's own transaction (store.CommitParams.JournalPrune).
//
// Live mode: a replayed model call emits the deltas it streamed the first
// time, so the re-run streams the text the log holds already: it is
// matched, not appended again (livereplay.go, protocol.LiveFromLog), and
// the new text of the call that was in flight follows it without a reset
// unless it answers otherwise (docs/guarantees.md).

// journalRecordTries is how many times a journal append that failed
// transiently (store.ErrUnavailable) is made before the run is handed
// back for recovery; journalRecordBackoff is the first wait between them.
const (
	journalRecordTries   = 5
	journalRecordBackoff = 20 * time.Millisecond
)

// errJournal marks the cause a run's context is cancelled with when its
// journal could not record a finished call: the superstep is abandoned
// (not committed) and the run handed back or stopped per the cause.
var errJournal = errors.New("host: journal append failed")

// runJournal is the workflow.Journal of one run driven here.
type runJournal struct {
	h  *Host
	r  *run
	js store.Journal
	// off: Config.NoJournal. Nothing is journaled or replayed, but a
	// recovered run's commit still prunes what an earlier host journaled.
	off bool
	// batch: the store appends journal entries with live events
	// (store.JournalBatcher), so an entry can ride with queued frames.
	batch bool

	mu sync.Mutex
	// step is the step whose entries are in entries; loaded says they
	// were read from the store (or are known: this host committed the
	// step before, so nobody else journaled its successor).
	step    int64
	loaded  bool
	entries map[string]journalEntry // by JournalCall.Key
	// dirty: the store may hold journal entries of the run's next commit
	// (or earlier steps); that commit prunes them. A recovered run starts
	// dirty (its interrupted superstep may have journaled); a run created
	// or continued here does not: every commit that followed a journaled
	// step pruned it.
	dirty bool
}

// journalEntry is one recorded call as the journal replays it.
type journalEntry struct {
	scope string
	pos   int
	hash  string
	data  []byte
}

// newJournal returns r's journal, or nil when the store keeps none.
func (h *Host) newJournal(r *run) *runJournal {
	js, ok := h.store.(store.Journal)
	if !ok {
		return nil
	}
	// A run created, continued or forked here has no journal entries for
	// its next step (every commit after a journaled step pruned them; a
	// new run has none), so its first journaled call reads nothing;
	// recovered marks the one case where the store may hold some.
	jb, ok := h.store.(store.JournalBatcher)
	return &runJournal{h: h, r: r, js: js, off: h.cfg.NoJournal, batch: ok && jb.AppendsJournal(),
		step: r.st.Step + 1, loaded: true, entries: map[string]journalEntry{}}
}

// recovered marks the journal of a run resumed from its last commit: its
// interrupted superstep's entries, if any, are read before its first
// journaled call and pruned by its next commit.
func (j *runJournal) recovered() {
	if j != nil {
		j.dirty, j.loaded = true, false
	}
}

// workflow returns j as the workflow's journal (nil for a nil or off j).
func (j *runJournal) workflow() workflow.Journal {
	if j == nil || j.off {
		return nil
	}
	return j
}

// parseKey splits a JournalCall.Key into scope and position.
func parseKey(key string) (scope string, pos int, ok bool) {
	i := strings.LastIndexByte(key, '#')
	if i < 0 {
		return "", 0, false
	}
	pos, err := strconv.Atoi(key[i+1:])
	return key[:i], pos, err == nil
}

// put adds e, discarding the entries of its scope at its position and
// after: a later entry at a position replaces what followed it. j.mu is
// held.
func (j *runJournal) put(key string, e journalEntry) {
	j.truncate(e.scope, e.pos)
	j.entries[key] = e
}

// truncate drops the entries of scope from pos on. j.mu is held.
func (j *runJournal) truncate(scope string, pos int) {
	for k, e := range j.entries {
		if e.scope == scope && e.pos >= pos {
			delete(j.entries, k)
		}
	}
}

// load makes entries those of step, reading the store unless they are
// known. j.mu is held.
func (j *runJournal) load(ctx context.Context, step int64) error {
	if j.loaded && j.step == step {
		return nil
	}
	list, err := j.js.JournalList(ctx, j.r.id, step)
	if err != nil {
		return err
	}
	j.step, j.loaded, j.entries = step, true, make(map[string]journalEntry, len(list))
	for _, e := range list {
		scope, pos, ok := parseKey(e.Key)
		if !ok {
			continue
		}
		j.put(e.Key, journalEntry{scope: scope, pos: pos, hash: e.Hash, data: e.Data})
	}
	if len(list) > 0 {
		j.dirty = true
	}
	return nil
}

// Replay answers call from the journal when it holds call's position with
// the same request; see workflow.Journal.
func (j *runJournal) Replay(ctx context.Context, call workflow.JournalCall) ([]byte, bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if err := j.load(ctx, call.Step); err != nil {
		// Making the call again is what a run without a journal does.
		j.h.log.Warn("host: journal unreadable; the call is made again", "run_id", j.r.id, "step", call.Step, "err", err)
		return nil, false
	}
	key := call.Key()
	e, ok := j.entries[key]
	if !ok {
		return nil, false
	}
	if e.hash != call.Hash {
		j.h.metrics.journal.diverged.Inc()
		j.h.log.Warn("host: journaled call's request differs; the journal of the executor is discarded from it on",
			"run_id", j.r.id, "step", call.Step, "scope", call.Scope, "pos", call.Pos, "kind", call.Kind, "name", call.Name)
		j.truncate(call.Scope, call.Pos)
		return nil, false
	}
	j.h.metrics.journal.replayed.WithLabelValues(call.Kind).Inc()
	return e.data, true
}

// Record appends call's result to the run's journal under the run's epoch
// and returns once it is durable. A transient failure is retried; a
// failure that stays, or a fencing, cancels the run with errJournal, so
// that the superstep is abandoned rather than committed.
func (j *runJournal) Record(ctx context.Context, call workflow.JournalCall, result []byte) error {
	p := &store.JournalAppendParams{RunID: j.r.id, Epoch: j.r.epoch, Step: call.Step,
		Entries: []store.JournalInput{{Key: call.Key(), Hash: call.Hash, Data: result}}}
	start := time.Now()
	// In live mode the call's deltas are usually still queued: the entry
	// goes with them, in their append (which retries transient failures
	// itself), instead of a write of its own.
	batched, err := j.h.batchJournal(j.r, call.Step, p.Entries[0])
	switch {
	case batched && err == nil:
		j.h.metrics.journal.batched.Inc()
	case !batched:
		err = j.append(ctx, p)
	}
	if err != nil {
		err = fmt.Errorf("%w: run %s step %d (%s %s): %w", errJournal, j.r.id, call.Step, call.Kind, call.Name, err)
		if ctx.Err() == nil {
			j.h.log.Warn("host: journal append failed; the superstep is abandoned", "run_id", j.r.id, "err", err)
			j.r.cancel(err)
		}
		return err
	}
	j.h.metrics.journal.recorded.WithLabelValues(call.Kind).Inc()
	j.h.metrics.journal.recordSeconds.Observe(time.Since(start).Seconds())
	j.mu.Lock()
	defer j.mu.Unlock()
	j.dirty = true
	if j.loaded && j.step == call.Step {
		j.put(call.Key(), journalEntry{scope: call.Scope, pos: call.Pos, hash: call.Hash, data: result})
	}
	return nil
}

// append writes p in a write of its own, retrying a transient failure;
// with r's create when it is still pending (createWithJournal).
func (j *runJournal) append(ctx context.Context, p *store.JournalAppendParams) error {
	if done, err := j.h.createWithJournal(ctx, j.r, p); done {
		return err
	}
	if err := j.h.writeCreate(ctx, j.r); err != nil {
		return err // the run is not in the store: nothing to journal in
	}
	return retryJournalWrite(ctx, func() error { return j.js.JournalAppend(ctx, p) })
}

// retryJournalWrite calls write until it succeeds, fails otherwise than
// transiently (store.ErrUnavailable: nothing was written), or was made
// journalRecordTries times, with a doubling wait between tries.
func retryJournalWrite(ctx context.Context, write func() error) error {
	backoff := journalRecordBackoff
	for try := 1; ; try++ {
		err := write()
		if err == nil || !errors.Is(err, store.ErrUnavailable) || try >= journalRecordTries || !wait.Sleep(ctx, backoff) {
			return err
		}
		backoff *= 2
	}
}

// prune reports whether the commit of step is to delete the run's
// journal (store.CommitParams.JournalPrune).
func (j *runJournal) prune() bool {
	if j == nil {
		return false
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.dirty
}

// committed records that step committed here: its journal is gone, and
// the next step's is empty (only this host's epoch can write it).
func (j *runJournal) committed(step int64) {
	if j == nil {
		return
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	j.step, j.loaded, j.dirty = step+1, true, false
	if j.entries == nil {
		j.entries = map[string]journalEntry{}
	} else {
		clear(j.entries)
	}
}

// journalCause returns, for a run whose driver returned err, the journal
// failure that stopped it when that is why: a fencing, a deleted or
// cancelled response or an unavailable store are then handled as if a
// commit had met them.
func journalCause(r *run, err error) error {
	if err == nil || !errors.Is(err, context.Canceled) {
		return err
	}
	if cause := context.Cause(r.ctx); errors.Is(cause, errJournal) {
		return cause
	}
	return err
}

// journalMetrics count the journal's work.
type journalMetrics struct {
	recorded      *prometheus.CounterVec
	replayed      *prometheus.CounterVec
	diverged      prometheus.Counter
	recordSeconds prometheus.Histogram
	batched       prometheus.Counter
}

func newJournalMetrics() *journalMetrics {
	return &journalMetrics{
		recorded: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "superstep_journal_recorded_total", Help: "Finished calls appended to runs' journals (kind: model, tool, step)."},
			[]string{"kind"}),
		replayed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "superstep_journal_replayed_total", Help: "Calls answered from a run's journal instead of being made again (kind: model, tool, step)."},
			[]string{"kind"}),
		diverged: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "superstep_journal_diverged_total",
			Help: "Journaled calls whose request differed when the superstep ran again; the executor's journal was discarded from there on."}),
		recordSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "superstep_journal_record_seconds", Help: "Latency of journal appends (the wait a finished call adds before its result is used).",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16)}),
		batched: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "superstep_journal_batched_total",
			Help: "Journal entries appended in the same write as queued live events, not in a write of their own."}),
	}
}

func (m *journalMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.recorded, m.replayed, m.diverged, m.recordSeconds, m.batched}
}
