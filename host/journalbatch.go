package host

import (
	"errors"

	"github.com/superstep/superstep/store"
)

// errJournalDropped is why a journal entry queued with live frames was not
// written: the frames were dropped unappended (the run stopped).
var errJournalDropped = errors.New("host: journal entry dropped with the live frames it was queued with")

// batchJournal makes entry (of step) durable with r's live frames when
// the store can (store.JournalBatcher) and frames are queued: the entry
// rides in the EventAppend of the next batch, and batchJournal returns
// once that batch returned. While an append is in flight with nothing
// queued behind it, it waits for the append first: frames queued
// meanwhile take the entry along. It reports false (nothing done) when
// there is nothing to ride with: the caller appends the entry itself.
func (h *Host) batchJournal(r *run, step int64, entry store.JournalInput) (bool, error) {
	if !r.liveMode || r.journal == nil || !r.journal.batch {
		return false, nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	q := &r.liveQ
	for {
		if r.liveRefusal() != nil {
			return false, nil // the plain append meets the same refusal
		}
		if len(q.frames) > 0 {
			break
		}
		if !q.inflight {
			return false, nil
		}
		q.cond.Wait()
	}
	gen := q.taken + 1 // the batch that takes the queued frames
	q.journal = append(q.journal, entry)
	q.journalStep = step
	h.test.journalQueued.Signal(step)
	for {
		switch {
		case q.finished >= gen:
			if q.appended >= gen {
				return true, nil
			}
			return true, q.err
		case q.taken < gen:
			if err := r.liveRefusal(); err != nil {
				return true, errors.Join(errJournalDropped, err) // dropped with the frames
			}
		}
		q.cond.Wait()
	}
}
