package postgres

import (
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/jackc/pgx/v5"
)

// Options configure Open. The zero value (or nil) gives the defaults.
type Options struct {
	// Schema is the PostgreSQL schema holding superstep's tables. It is
	// created if missing and set as search_path on every pooled connection.
	// Default "": the connection's own search_path (normally public).
	Schema string
	// MaxConns is the pool size. Default 0: pgx's default, max(4, CPUs).
	MaxConns int32
	// LeaseConns is the size of a second pool kept for lease renewals and
	// host heartbeats, so that they never queue behind commits, creates
	// and reads for a connection: a renewal that waits loses the lease of
	// a healthy run on a busy host. Default 2.
	LeaseConns int32
	// Channel is the LISTEN/NOTIFY channel announcing new events. Every
	// host using one schema must use the same channel. Default
	// "superstep_events" followed by "_" and Schema when Schema is set.
	Channel string
	// CacheRuns is how many runs' last checkpoint part hashes are
	// remembered so that Commit sends only changed parts. Default 4096.
	CacheRuns int
	// NotifyInCommit sends the NOTIFY announcing new events inside the
	// writing transaction, so an announcement can never be lost, at the
	// price of serialising every notifying commit of the database
	// (PostgreSQL holds its notify-queue lock across the commit's WAL
	// flush). Default false: announce right after the commit, in batches.
	NotifyInCommit bool
	// PollInterval bounds how long EventWait sleeps without a
	// notification before it returns (callers re-read), covering
	// announcements lost to a crash or a broken listener connection.
	// Default 2s.
	PollInterval time.Duration
	// NotifyInterval is the least time between two NOTIFY statements of
	// this store (announcements made meanwhile are sent together), when
	// NotifyInCommit is false. Default 5ms; readers in this process are
	// woken at once regardless.
	NotifyInterval time.Duration
	// WriteTimeout bounds a write once it may have been sent. A write is
	// not interrupted by its context's cancellation after that point, so
	// that an error always means nothing was written. Default 30s.
	WriteTimeout time.Duration
	// GroupCommit writes commits of different runs made at once through
	// this store in one transaction (see CommitBatchMax). It is on by
	// default now (lease renewals have their own pool, LeaseConns, so a
	// batch holding a run's row no longer delays them behind commits);
	// setting it changes nothing. NoGroupCommit turns it off.
	GroupCommit bool
	// CommitBatchMax is the most commits written in one transaction
	// (group commit: commits of different runs made at once through this
	// store share one transaction and one WAL flush, each in a savepoint
	// of its own). Default 64, PostgreSQL's count of subtransactions a
	// backend keeps track of without spilling; 1 turns group commit off,
	// as NoGroupCommit does.
	CommitBatchMax int
	// CommitBatchesInFlight is how many group-commit transactions may be
	// in flight at once, each on a connection of its own; commits made
	// while that many are queue for the next. Default 2.
	CommitBatchesInFlight int
	// CommitBatchBytes bounds the payload bytes (events, snapshot, new
	// checkpoint parts) of one group-commit transaction; a larger commit
	// goes alone. Default 16 MiB.
	CommitBatchBytes int
	// HostClock is the clock of the host using the store, read for the
	// times a call takes from its host when it passes none. Default
	// time.Now; tests set it to play a host whose clock is off.
	HostClock func() time.Time
	// NoGroupCommit turns group commit off: each commit is its own round
	// trip (and transaction), made at once however many are in flight.
	NoGroupCommit bool
	// tracer, when set (tests only), traces the statements of the main
	// pool's connections.
	tracer pgx.QueryTracer
	// createInTx (tests only) makes every ResponseCreate take the
	// transaction of several statements, the reference for the one
	// statement of createNewRun.
	createInTx bool
	// createAlone (tests only) keeps new runs' creates out of the
	// group-commit batches: each is its own statement in autocommit.
	createAlone bool
}

const (
	defaultChannel        = "superstep_events"
	defaultCacheRuns      = 4096
	defaultPollInterval   = 2 * time.Second
	defaultWriteTimeout   = 30 * time.Second
	defaultNotifyInterval = 5 * time.Millisecond
	defaultLeaseConns     = 2
	defaultCommitBatchMax = 64
	defaultCommitBytes    = 16 << 20
	defaultCommitInFlight = 2
	maxIdentifierLen      = 63 // PostgreSQL's NAMEDATALEN-1
)

var identifierRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// withDefaults returns a copy of o (nil allowed) with defaults filled in.
func (o *Options) withDefaults() Options {
	var c Options
	if o != nil {
		c = *o
	}
	if c.Channel == "" {
		c.Channel = defaultChannel
		if c.Schema != "" {
			c.Channel += "_" + c.Schema
		}
		if len(c.Channel) > maxIdentifierLen {
			c.Channel = c.Channel[:maxIdentifierLen]
		}
	}
	if c.PollInterval == 0 {
		c.PollInterval = defaultPollInterval
	}
	if c.NotifyInterval == 0 {
		c.NotifyInterval = defaultNotifyInterval
	}
	if c.WriteTimeout == 0 {
		c.WriteTimeout = defaultWriteTimeout
	}
	if c.CacheRuns == 0 {
		c.CacheRuns = defaultCacheRuns
	}
	if c.LeaseConns == 0 {
		c.LeaseConns = defaultLeaseConns
	}
	if c.CommitBatchMax == 0 {
		c.CommitBatchMax = defaultCommitBatchMax
	}
	// GroupCommit is what the store reads: on unless turned off.
	c.GroupCommit = !c.NoGroupCommit && c.CommitBatchMax != 1
	if c.CommitBatchesInFlight == 0 {
		c.CommitBatchesInFlight = defaultCommitInFlight
	}
	if c.CommitBatchBytes == 0 {
		c.CommitBatchBytes = defaultCommitBytes
	}
	if c.HostClock == nil {
		c.HostClock = time.Now
	}
	return c
}

// validate names the first bad field.
func (o *Options) validate() error {
	var errs []error
	if o.Schema != "" && (!identifierRE.MatchString(o.Schema) || len(o.Schema) > maxIdentifierLen) {
		errs = append(errs, fmt.Errorf("store/postgres: Options.Schema %q is not a plain identifier", o.Schema))
	}
	if o.MaxConns < 0 {
		errs = append(errs, fmt.Errorf("store/postgres: Options.MaxConns %d is negative", o.MaxConns))
	}
	if o.LeaseConns < 0 {
		errs = append(errs, fmt.Errorf("store/postgres: Options.LeaseConns %d is negative", o.LeaseConns))
	}
	if len(o.Channel) > maxIdentifierLen {
		errs = append(errs, fmt.Errorf("store/postgres: Options.Channel %q is longer than %d bytes", o.Channel, maxIdentifierLen))
	}
	if o.PollInterval < 0 {
		errs = append(errs, fmt.Errorf("store/postgres: Options.PollInterval %v is negative", o.PollInterval))
	}
	if o.NotifyInterval < 0 {
		errs = append(errs, fmt.Errorf("store/postgres: Options.NotifyInterval %v is negative", o.NotifyInterval))
	}
	if o.WriteTimeout < 0 {
		errs = append(errs, fmt.Errorf("store/postgres: Options.WriteTimeout %v is negative", o.WriteTimeout))
	}
	if o.CacheRuns < 0 {
		errs = append(errs, fmt.Errorf("store/postgres: Options.CacheRuns %d is negative", o.CacheRuns))
	}
	if o.CommitBatchMax < 0 {
		errs = append(errs, fmt.Errorf("store/postgres: Options.CommitBatchMax %d is negative", o.CommitBatchMax))
	}
	if o.CommitBatchesInFlight < 0 {
		errs = append(errs, fmt.Errorf("store/postgres: Options.CommitBatchesInFlight %d is negative", o.CommitBatchesInFlight))
	}
	if o.CommitBatchBytes < 0 {
		errs = append(errs, fmt.Errorf("store/postgres: Options.CommitBatchBytes %d is negative", o.CommitBatchBytes))
	}
	return errors.Join(errs...)
}
