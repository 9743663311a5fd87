package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/superstep/superstep/store"
	"github.com/superstep/superstep/store/internal/eventrec"
)

// commitSQL calls the migration's superstep_commit: one statement, so one
// round trip and one transaction in autocommit mode. Its time, which the
// lease fence compares with the expiry and which the commit records, is
// the caller's Now or else the database's clock (callTime).
const commitSQL = `SELECT o_next_seq, o_bytes FROM superstep_commit($1, $2, $3, $4, $5, $6, $7, $8, $9,
	$10, $11, $12, $13, $14, $15, $16, $17, $18, coalesce($19::timestamptz, now()), $20, $21, $22, $23, $24)`

// Commit atomically writes one superstep: the checkpoint, the step's events
// and the head response's status and snapshot, in one transaction made by
// one SQL function call. With Options.GroupCommit, commits made at once
// through s are written together, in one transaction (see groupcommit.go);
// each still succeeds or fails alone. See store.Store.
func (s *Store) Commit(ctx context.Context, p *store.CommitParams) (*store.CommitResult, error) {
	if _, err := s.begin(p.Now); err != nil {
		return nil, err
	}
	if err := validateWrite("commit", p.Status, p.Events, true); err != nil {
		return nil, err
	}
	if err := p.CheckFinishing(); err != nil {
		return nil, fmt.Errorf("store/postgres: commit: %w", err)
	}
	ev := encodeEvents(p.Events)
	known, trusted := s.parts.known(p.RunID, p.Epoch, p.Step)
	for attempt := 0; ; attempt++ {
		enc := encodeParts(p.Checkpoint, known, trusted)
		var res *store.CommitResult
		var err error
		if s.opts.GroupCommit {
			r := s.newCommitReq(ctx, p, ev, enc)
			if err = s.commits.do(ctx, r); err == nil {
				res = &r.res
			}
		} else {
			res, err = s.commitOnce(ctx, p, ev, enc)
		}
		if errors.Is(err, errMissingBlob) && attempt == 0 {
			s.parts.forget(p.RunID)
			known, trusted = nil, false
			continue
		}
		if errors.Is(err, store.ErrConflict) {
			err = s.explainRefusal(ctx, p.ResponseID, p.Status == store.StatusCancelled, err)
		}
		if err != nil {
			return nil, err
		}
		s.parts.set(p.RunID, enc.all, p.Epoch, p.Step)
		res.BytesWritten += enc.inline // inline parts are written by every commit that has them
		if len(p.Events) > 0 || p.Status.Terminal() {
			s.announce(p.ResponseID)
		}
		return res, nil
	}
}

// commitOnce runs the commit once, without group commit: as a batch of
// one.
func (s *Store) commitOnce(ctx context.Context, p *store.CommitParams, ev *encodedEvents, enc *encodedParts) (*store.CommitResult, error) {
	r := s.newCommitReq(ctx, p, ev, enc)
	if err := s.commitAlone(r); err != nil {
		return nil, err
	}
	return &r.res, nil
}

// reopenCancelled lets the cancelled commit of a response whose cancel is
// recorded through superstep_commit, which writes only responses that are
// not final: ResponseCancel made its status cancelled, so it is set back to
// in progress in the commit's own transaction (the commit then writes
// cancelled, with the terminal event; a failed commit rolls it back). The
// run is locked first, in the order Commit and ResponseDelete lock.
func reopenCancelled(ctx context.Context, tx pgx.Tx, runID, responseID string) error {
	if _, err := tx.Exec(ctx, "SELECT 1 FROM runs WHERE id = $1 FOR UPDATE", runID); err != nil {
		return err
	}
	_, err := tx.Exec(ctx, `UPDATE responses SET status = 'in_progress'
		WHERE id = $1 AND cancel_requested AND completed_at IS NULL AND status = 'cancelled'`, responseID)
	return err
}

// explainRefusal tells apart the conflicts superstep_commit and
// superstep_append_batch raise for a response they may not write: deleted
// (store.ErrNotFound) or cancelled (store.ErrCancelled, unless the write is
// the cancelled commit). Any other conflict is returned as it was.
func (s *Store) explainRefusal(ctx context.Context, responseID string, cancelling bool, conflict error) error {
	var cancelled, open bool
	err := s.pool.QueryRow(ctx, "SELECT cancel_requested, completed_at IS NULL FROM responses WHERE id = $1",
		responseID).Scan(&cancelled, &open)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("store/postgres: write response %s: %w (%v)", responseID, store.ErrNotFound, conflict)
	case err == nil && cancelled && open && !cancelling:
		return fmt.Errorf("store/postgres: write response %s: %w", responseID, store.ErrCancelled)
	}
	return conflict
}

// encodedEvents are events as the SQL functions take them: one log record
// (store/internal/eventrec) of count events from seq first, whose payloads
// hold bytes bytes.
type encodedEvents struct {
	first, count, bytes int64
	data                []byte
}

func encodeEvents(events []store.EventInput) *encodedEvents {
	e := &encodedEvents{count: int64(len(events))}
	if len(events) == 0 {
		return e
	}
	e.first = events[0].Seq
	for i := range events {
		e.bytes += int64(events[i].Len())
	}
	e.data = eventrec.Encode(events)
	return e
}

// validateWrite checks what the store can check without the database:
// a known status (when withStatus) and contiguous sequence numbers.
func validateWrite(op string, status store.Status, events []store.EventInput, withStatus bool) error {
	if withStatus && !status.Valid() {
		return fmt.Errorf("store/postgres: %s: invalid status %q", op, status)
	}
	if err := store.CheckSplices(events); err != nil {
		return fmt.Errorf("store/postgres: %s: %w", op, err)
	}
	for i, ev := range events {
		if i > 0 && ev.Seq != events[0].Seq+int64(i) {
			return fmt.Errorf("store/postgres: %s: event seq %d does not follow %d: %w", op, ev.Seq, events[i-1].Seq, store.ErrConflict)
		}
	}
	if len(events) > 0 && events[0].Seq < 0 {
		return fmt.Errorf("store/postgres: %s: negative event seq %d: %w", op, events[0].Seq, store.ErrConflict)
	}
	return nil
}
