package postgres

import (
	"context"
	"time"

	"github.com/superstep/superstep/store"
)

var _ store.Clock = (*Store)(nil)

// StoreNow returns the database server's clock, by which every lease is
// judged: claims, renewals, releases, the fence of commits and appends,
// resume back-offs. A host compares it with its own clock to map lease
// expiries onto it and to warn when it is off. See store.Clock.
func (s *Store) StoreNow(ctx context.Context) (time.Time, error) {
	if s.closed.Load() {
		return time.Time{}, store.ErrClosed
	}
	var now time.Time
	if err := s.pool.QueryRow(ctx, "SELECT now()").Scan(&now); err != nil {
		return time.Time{}, mapError("read the database clock", "", 0, err)
	}
	return now.UTC(), nil
}

// callTime is the time a lease-judged call is made at, as a statement
// parameter: the caller's Now at PostgreSQL's precision when it set one
// (tests move a call in time with it), else nil, which the statements read
// as the database's clock (coalesce($n::timestamptz, now()): one value per
// transaction). A host's own clock never decides a lease: hosts whose
// clocks disagree would otherwise take each other's live runs, or keep a
// dead host's runs from being taken over for as long as its clock was
// ahead.
func callTime(now time.Time) *time.Time {
	if now.IsZero() {
		return nil
	}
	t := normTime(now)
	return &t
}

// micros is a duration as the microseconds a statement multiplies by
// interval '1 microsecond' (PostgreSQL's precision), so that durations are
// added to times in the database.
func micros(d time.Duration) int64 { return d.Microseconds() }
