package postgres

import (
	"context"

	"github.com/superstep/superstep/internal/fault"
)

// commitPoints are the fault points inside the commit function, in the
// order its statements run.
var commitPoints = []string{
	"commit.run_updated",      // after the fenced run update
	"commit.response_updated", // after the response's status and next_seq
	"commit.written",          // after events, blobs and checkpoint row
}

// commitFault asks the injector armed in ctx (tests built with -tags
// faults) which commit point fails. It returns that point's name, which the
// commit function raises at after running the statements before it in the
// same transaction, and the injected error to report; "" and nil for none.
func commitFault(ctx context.Context) (string, error) {
	for _, name := range commitPoints {
		if err := fault.Point(ctx, name); err != nil {
			return name, err
		}
	}
	return "", nil
}
