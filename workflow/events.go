package workflow

import (
	"context"
	"iter"
)

// Events drives the run like Run and yields each superstep's events after
// commit returned nil for that superstep (commit may be nil to commit
// nothing, for in-memory use). A final error (commit failure, cancellation,
// run failure) is yielded as (nil, err). Stopping the iteration stops the
// run at the next boundary; the superstep whose events were being yielded
// is committed.
func (r *Run) Events(ctx context.Context, commit CommitFunc, opts *RunOptions) iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		stopped := false
		wrapped := func(ctx context.Context, s *Step) error {
			if commit != nil {
				if err := commit(ctx, s); err != nil {
					return err
				}
			}
			for _, e := range s.Events {
				if !yield(e, nil) {
					stopped = true
					return nil
				}
			}
			return nil
		}
		err := r.drive(ctx, wrapped, opts, func() bool { return stopped })
		if stopped {
			return
		}
		if err != nil {
			yield(nil, err)
		}
	}
}
