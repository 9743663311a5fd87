package store

import (
	"context"
	"time"
)

// Journal is implemented by stores that keep a run's journal: what the
// running superstep finished before its commit (a model call's reply, a
// tool call's result, a sub-step), so that a superstep re-run after a
// crash answers those from the journal instead of doing them again. It is
// optional: callers find it with a type assertion; both backends
// implement it.
//
// A run's journal holds entries of its next step only (LastStep+1) in
// practice: JournalAppend refuses any other step, and a Commit with
// JournalPrune deletes the entries of the run's steps up to the committed
// one in the commit's own transaction, once their results are in the
// checkpoint. Deleting a run deletes its journal.
type Journal interface {
	// JournalAppend appends p.Entries, in order, to the journal of
	// (p.RunID, p.Step) in one write, fenced like EventAppend: ErrFenced
	// when p.Epoch is not the run's current epoch or its lease expired or
	// was released, ErrNotFound for an unknown run, ErrConflict when the
	// run is not active or p.Step is not its LastStep+1. After an error
	// nothing of it is stored.
	JournalAppend(ctx context.Context, p *JournalAppendParams) error
	// JournalList returns the entries of (runID, step) in the order they
	// were appended (Seq ascending); none for an unknown run or step.
	JournalList(ctx context.Context, runID string, step int64) ([]JournalEntry, error)
}

// JournalAppendParams are the arguments of JournalAppend.
type JournalAppendParams struct {
	RunID   string
	Epoch   int64
	Step    int64
	Entries []JournalInput
	Now     time.Time // see Clock: hosts pass none
}

// JournalInput is an entry to append. The store treats its fields as
// opaque; Key says what the entry records (the host: which executor's
// which call), Hash identifies the request that call made.
type JournalInput struct {
	Key  string
	Hash string
	Data []byte
}

// JournalEntry is one stored entry of a run's journal.
type JournalEntry struct {
	RunID string
	Step  int64
	// Seq orders the entries of the run's journal: a later append has a
	// greater Seq. Numbers are the store's, not contiguous.
	Seq int64
	// Epoch is the lease epoch the entry was appended under.
	Epoch     int64
	Key       string
	Hash      string
	Data      []byte
	CreatedAt time.Time
}

// JournalBatcher is implemented by stores whose EventAppend also appends
// EventAppendParams.Journal, in the same transaction as the events (both
// backends). A host that has live events queued when a call finishes can
// then make the call's journal entry durable with them: one write instead
// of two. It is optional: callers find it with a type assertion, and a
// store without it gets a plain JournalAppend.
type JournalBatcher interface {
	Journal
	// AppendsJournal reports whether EventAppend honours
	// EventAppendParams.Journal (a wrapper may embed a store that does
	// and say it does not).
	AppendsJournal() bool
}
