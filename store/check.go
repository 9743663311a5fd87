package store

import (
	"context"
	"errors"
	"fmt"
)

// Check verifies the invariants of a whole store, like bbolt's Tx.Check:
//
//   - every run has at least one response, all of them name the run, and
//     every response but the head is terminal;
//   - an Active run's head response exists and is not terminal, unless its
//     cancel is recorded and its cancelled event still to come (Status
//     cancelled, CompletedAt nil), and an inactive run's head (when it
//     still exists) is terminal with its terminal event committed;
//   - each response's event log holds sequence numbers 0..NextSeq-1 with no
//     gap, and no event or CommitStep lies beyond the run's LastStep; when
//     the store lists its log records (EventRecordLister), they start at 0,
//     never overlap, leave no gap, end at NextSeq-1 and agree with the
//     events' steps;
//   - checkpoint history is ordered, each parent link points backwards (to
//     the previous checkpoint or one pruned since), no checkpoint lies
//     beyond LastStep, and the checkpoint of the last commit exists
//     (CheckpointGetLast) whenever LastStep > 0, as does the checkpoint of
//     every response's CommitStep > 0;
//   - an owned lease has an epoch >= 1 and an expiry.
//
// It returns every problem found, joined, each matching ErrCorrupt; other
// errors are failures to read the store. Check reads the whole store and is
// meant for tests, crash tests and `superstep check`, not for a hot path.
func Check(ctx context.Context, s Store) error {
	var errs []error
	after := ""
	for {
		runs, err := s.RunList(ctx, &RunListParams{After: after, Limit: 100})
		if err != nil {
			return fmt.Errorf("store: check: list runs: %w", err)
		}
		for _, r := range runs {
			if err := checkRun(ctx, s, r); err != nil {
				errs = append(errs, err)
			}
			after = r.ID
		}
		if len(runs) < 100 {
			return errors.Join(errs...)
		}
	}
}

// checkRun checks one run, its responses, their logs and its checkpoints.
func checkRun(ctx context.Context, s Store, r *Run) error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, Corruptf("check: run %s: %s", r.ID, fmt.Sprintf(format, args...)))
	}
	if r.LastStep < 0 {
		bad("LastStep %d < 0", r.LastStep)
	}
	if r.Lease.Owner != "" && (r.Lease.Epoch < 1 || r.Lease.ExpiresAt.IsZero()) {
		bad("lease owned by %q with epoch %d, expiry %v", r.Lease.Owner, r.Lease.Epoch, r.Lease.ExpiresAt)
	}
	resps, err := s.ResponseListByRun(ctx, r.ID)
	if err != nil {
		return fmt.Errorf("store: check: run %s: list responses: %w", r.ID, err)
	}
	if len(resps) == 0 {
		bad("no responses")
	}
	steps, err := checkResponses(ctx, s, r, resps, bad)
	if err != nil {
		return err
	}
	if err := checkCheckpoints(ctx, s, r, steps, bad); err != nil {
		return err
	}
	return errors.Join(errs...)
}

// checkResponses checks the run's responses and their event logs and
// returns the CommitSteps the responses need.
func checkResponses(ctx context.Context, s Store, r *Run, resps []*Response, bad func(string, ...any)) ([]int64, error) {
	var head *Response
	var steps []int64
	for _, resp := range resps {
		if resp.RunID != r.ID {
			bad("response %s names run %q", resp.ID, resp.RunID)
		}
		if !resp.Status.Valid() {
			bad("response %s has status %q", resp.ID, resp.Status)
		}
		if resp.ID == r.HeadResponseID {
			head = resp
		} else if !resp.Finished() {
			bad("response %s is not the head but has status %q (completed at %v)", resp.ID, resp.Status, resp.CompletedAt)
		}
		if resp.CommitStep < 0 || resp.CommitStep > r.LastStep {
			bad("response %s CommitStep %d outside [0, LastStep %d]", resp.ID, resp.CommitStep, r.LastStep)
		}
		if resp.CommitStep > 0 {
			steps = append(steps, resp.CommitStep)
		}
		if err := checkEvents(ctx, s, r, resp, bad); err != nil {
			return nil, err
		}
	}
	switch {
	case head == nil && len(resps) > 0:
		bad("head response %q does not exist", r.HeadResponseID)
	case head != nil && r.Active && head.Status.Terminal() && !cancelPending(head):
		bad("Active but head response %s has status %q", head.ID, head.Status)
	case head != nil && !r.Active && !head.Finished():
		bad("inactive but head response %s has status %q (completed at %v)", head.ID, head.Status, head.CompletedAt)
	}
	return steps, nil
}

// cancelPending reports whether resp reads as cancelled because its cancel
// is recorded while its owner has still to commit the cancelled event.
func cancelPending(resp *Response) bool {
	return resp.CancelRequested && resp.Status == StatusCancelled && resp.CompletedAt == nil
}

// checkEvents checks that a response's log is 0..NextSeq-1 without a gap.
func checkEvents(ctx context.Context, s Store, r *Run, resp *Response, bad func(string, ...any)) error {
	next := int64(0)
	for {
		evs, err := s.EventList(ctx, &EventListParams{ResponseID: resp.ID, After: next - 1})
		if err != nil {
			return fmt.Errorf("store: check: response %s: list events: %w", resp.ID, err)
		}
		for _, ev := range evs {
			if ev.Seq != next {
				bad("response %s: event seq %d where %d was expected", resp.ID, ev.Seq, next)
				return nil
			}
			if ev.ResponseID != resp.ID || ev.Step > r.LastStep || ev.Step < -1 {
				bad("response %s: event %d has response %q, step %d (LastStep %d)", resp.ID, ev.Seq, ev.ResponseID, ev.Step, r.LastStep)
			}
			next++
		}
		if len(evs) == 0 {
			break
		}
	}
	if next != resp.NextSeq {
		bad("response %s: log holds %d events but NextSeq is %d", resp.ID, next, resp.NextSeq)
	}
	return checkRecords(ctx, s, r, resp, bad)
}

// checkRecords checks the records behind a response's log: contiguous
// ranges from 0 to NextSeq-1, each with a step a commit could have written.
func checkRecords(ctx context.Context, s Store, r *Run, resp *Response, bad func(string, ...any)) error {
	l, ok := s.(EventRecordLister)
	if !ok {
		return nil
	}
	recs, err := l.EventRecords(ctx, resp.ID)
	if err != nil {
		return fmt.Errorf("store: check: response %s: list event records: %w", resp.ID, err)
	}
	next := int64(0)
	for _, rec := range recs {
		switch {
		case rec.FirstSeq < next:
			bad("response %s: event record [%d, %d] overlaps the records before it (up to %d)", resp.ID, rec.FirstSeq, rec.LastSeq, next-1)
		case rec.FirstSeq > next:
			bad("response %s: event record [%d, %d] leaves a gap after %d", resp.ID, rec.FirstSeq, rec.LastSeq, next-1)
		case rec.LastSeq < rec.FirstSeq:
			bad("response %s: event record [%d, %d] is empty or reversed", resp.ID, rec.FirstSeq, rec.LastSeq)
		case rec.Step > r.LastStep || rec.Step < -1:
			bad("response %s: event record [%d, %d] has step %d (LastStep %d)", resp.ID, rec.FirstSeq, rec.LastSeq, rec.Step, r.LastStep)
		}
		next = max(next, rec.LastSeq+1)
	}
	if next != resp.NextSeq {
		bad("response %s: event records end at %d but NextSeq is %d", resp.ID, next-1, resp.NextSeq)
	}
	return nil
}

// checkCheckpoints checks the run's checkpoint history and that the
// checkpoints of the last commit and of every needed step exist.
func checkCheckpoints(ctx context.Context, s Store, r *Run, needed []int64, bad func(string, ...any)) error {
	infos, err := s.CheckpointList(ctx, r.ID)
	if err != nil {
		return fmt.Errorf("store: check: run %s: list checkpoints: %w", r.ID, err)
	}
	have := make(map[int64]bool, len(infos))
	for i, c := range infos {
		have[c.Step] = true
		switch {
		case c.RunID != r.ID:
			bad("checkpoint %d names run %q", c.Step, c.RunID)
		case c.Step > r.LastStep:
			bad("checkpoint %d beyond LastStep %d", c.Step, r.LastStep)
		case c.ParentStep >= c.Step || c.ParentStep < -1:
			bad("checkpoint %d has parent %d", c.Step, c.ParentStep)
		case i > 0 && c.ParentStep < infos[i-1].Step:
			bad("checkpoint %d has parent %d before the previous checkpoint %d", c.Step, c.ParentStep, infos[i-1].Step)
		case i > 0 && infos[i-1].Step >= c.Step:
			bad("checkpoints out of order: %d then %d", infos[i-1].Step, c.Step)
		}
	}
	for _, step := range needed {
		if !have[step] {
			bad("checkpoint %d, the CommitStep of a response, is missing", step)
		}
	}
	if r.LastStep == 0 && !have[0] {
		return nil
	}
	last, err := s.CheckpointGetLast(ctx, r.ID)
	switch {
	case errors.Is(err, ErrNotFound):
		bad("checkpoint of the last commit (step %d) is missing", r.LastStep)
	case errors.Is(err, ErrCorrupt):
		bad("checkpoint of the last commit: %v", err)
	case err != nil:
		return fmt.Errorf("store: check: run %s: last checkpoint: %w", r.ID, err)
	case last.Step != r.LastStep:
		bad("CheckpointGetLast returned step %d, LastStep is %d", last.Step, r.LastStep)
	}
	return nil
}
