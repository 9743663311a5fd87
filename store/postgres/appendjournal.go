package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/superstep/superstep/store"
)

var _ store.JournalBatcher = (*Store)(nil)

// AppendsJournal reports that EventAppend appends
// EventAppendParams.Journal in its transaction (store.JournalBatcher).
func (s *Store) AppendsJournal() bool { return true }

// errBatchJournal aborts a batch whose call's journal entries were not all
// inserted although its events were (a journal step that is not the run's
// next): nothing of the batch is stored, and each call fails.
var errBatchJournal = errors.New("store/postgres: journal entries refused")

// writeWithJournal is write for a batch in which some call carries
// journal entries (store.JournalBatcher): in one explicit transaction, the
// batch's events (superstep_append_batch, as write), then the entries of
// each call whose events were appended, fenced again by journalAppendSQL.
// A call refused by the batch function stores no entry; a call whose
// entries are refused when its events were not aborts the transaction (a
// caller's bug: ErrConflict for it, the others may try again).
func (a *appender) writeWithJournal(batch []*appendReq) {
	var codes, details []string
	refused := -1 // the call whose journal entries were refused
	err := a.s.write(batch[0].ctx, func(ctx context.Context, conn *pgxpool.Conn) error {
		return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			var err error
			if codes, details, err = a.appendBatch(ctx, tx, batch); err != nil {
				return err
			}
			for i, r := range batch {
				if len(r.p.Journal) == 0 || i >= len(codes) || codes[i] != "" {
					continue
				}
				keys := make([]string, len(r.p.Journal))
				hashes := make([]string, len(r.p.Journal))
				data := make([][]byte, len(r.p.Journal))
				for k, e := range r.p.Journal {
					keys[k], hashes[k], data[k] = e.Key, e.Hash, e.Data
				}
				tag, err := tx.Exec(ctx, journalAppendSQL, r.p.RunID, r.p.Epoch, r.p.JournalStep, keys, hashes, data, r.at)
				if err != nil {
					return err
				}
				if tag.RowsAffected() != int64(len(keys)) {
					refused = i
					return errBatchJournal
				}
			}
			return nil
		})
	})
	for i, r := range batch {
		switch {
		case refused >= 0 && errors.Is(err, errBatchJournal):
			cause := fmt.Errorf("store/postgres: append events to %s: %w", r.p.ResponseID, store.ErrUnavailable)
			if i == refused {
				cause = fmt.Errorf("store/postgres: append events to %s: journal of step %d refused: %w",
					r.p.ResponseID, r.p.JournalStep, store.ErrConflict)
			}
			r.done <- cause
		default:
			r.done <- a.result(r, i, codes, details, err)
		}
	}
}
