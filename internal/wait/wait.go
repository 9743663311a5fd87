// Package wait holds superstep's one "sleep d or until ctx ends", the wait
// between two attempts (a retried model call, executor, commit or
// reconnect) or two rounds of a loop. Sleep promises to return as soon as
// the duration elapsed or the context ended, to say which, and to leave no
// timer behind.
package wait

import (
	"context"
	"time"
)

// Sleep waits d or until ctx is done, whichever comes first, and reports
// whether d elapsed (false: ctx ended first, or had already ended). A d of
// zero or less does not wait: Sleep reports whether ctx is still live.
func Sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
