package sqlite

import (
	"errors"
	"fmt"
	"time"
)

// Synchronous is SQLite's synchronous setting for the writer connection.
type Synchronous string

// Synchronous settings.
const (
	// SynchronousFull syncs the WAL on every commit: a commit that returned
	// survives a power loss.
	SynchronousFull Synchronous = "FULL"
	// SynchronousNormal syncs the WAL only at checkpoints: a commit that
	// returned survives a process crash (SIGKILL), but the last commits
	// before a power loss may be lost.
	SynchronousNormal Synchronous = "NORMAL"
)

// Defaults and bounds of Options.
const (
	BusyTimeoutDefault = 5 * time.Second
	MaxBatchDefault    = 256
	ReadConnsDefault   = 4
	PageSizeDefault    = 4096

	WALAutocheckpointDefault = 8192
)

// Options configure Open. A nil *Options and zero fields mean the defaults.
type Options struct {
	// Synchronous is SynchronousFull (default) or SynchronousNormal.
	Synchronous Synchronous
	// BusyTimeout is how long a connection waits for a lock held by
	// another connection before failing; default BusyTimeoutDefault.
	BusyTimeout time.Duration
	// MaxBatch caps how many writes a leader group-commits in
	// one transaction; default MaxBatchDefault.
	MaxBatch int
	// BatchDelay is how long a leader waits for more writes after the
	// first of a batch arrived. Default 0: a batch holds the writes that
	// queued while the previous transaction committed, which already
	// groups concurrent runs without delaying a lone writer.
	BatchDelay time.Duration
	// ReadConns is the size of the read connection pool; default
	// ReadConnsDefault.
	ReadConns int
	// PageSize is the SQLite page size of a new database, a power of two
	// from 512 to 65536; an existing database keeps its own. Every page a
	// commit dirties costs a whole page in the WAL, so small pages write
	// fewer bytes per superstep, while large pages let the rows of many
	// runs share pages, so a group commit dirties fewer of them and the
	// single writer makes fewer WAL writes (two pwrite calls a page). With
	// the writer as it is since 2026-12-05, 4 KB pages against 1 KB (bench,
	// SQLite FULL, three interleaved idle pairs): W1 +12-22 % at
	// concurrency 8, +19-30 % at 64, -3 % at 1; W3 +10-29 %.
	// Default PageSizeDefault (4096, SQLite's own; 1024 before).
	PageSize int
	// WALAutocheckpoint is how many WAL pages trigger copying the WAL back
	// into the database file (SQLite's wal_autocheckpoint; SQLite's own
	// default is 1000). The copy runs inside the commit that crosses the
	// threshold, so a larger value makes those stalls rarer at the cost
	// of a larger WAL file. Default WALAutocheckpointDefault.
	WALAutocheckpoint int
}

// WithDefaults returns a copy of o (which may be nil) with zero fields set
// to their defaults.
func (o *Options) WithDefaults() *Options {
	var c Options
	if o != nil {
		c = *o
	}
	if c.Synchronous == "" {
		c.Synchronous = SynchronousFull
	}
	if c.BusyTimeout == 0 {
		c.BusyTimeout = BusyTimeoutDefault
	}
	if c.MaxBatch == 0 {
		c.MaxBatch = MaxBatchDefault
	}
	if c.ReadConns == 0 {
		c.ReadConns = ReadConnsDefault
	}
	if c.PageSize == 0 {
		c.PageSize = PageSizeDefault
	}
	if c.WALAutocheckpoint == 0 {
		c.WALAutocheckpoint = WALAutocheckpointDefault
	}
	return &c
}

// validate reports every bad field of a defaulted Options.
func (o *Options) validate() error {
	var errs []error
	if o.Synchronous != SynchronousFull && o.Synchronous != SynchronousNormal {
		errs = append(errs, fmt.Errorf("sqlite: Options.Synchronous %q: want FULL or NORMAL", o.Synchronous))
	}
	if o.BusyTimeout < 0 {
		errs = append(errs, fmt.Errorf("sqlite: Options.BusyTimeout %v < 0", o.BusyTimeout))
	}
	if o.MaxBatch < 1 {
		errs = append(errs, fmt.Errorf("sqlite: Options.MaxBatch %d < 1", o.MaxBatch))
	}
	if o.BatchDelay < 0 {
		errs = append(errs, fmt.Errorf("sqlite: Options.BatchDelay %v < 0", o.BatchDelay))
	}
	if o.ReadConns < 1 {
		errs = append(errs, fmt.Errorf("sqlite: Options.ReadConns %d < 1", o.ReadConns))
	}
	if o.WALAutocheckpoint < 1 {
		errs = append(errs, fmt.Errorf("sqlite: Options.WALAutocheckpoint %d < 1", o.WALAutocheckpoint))
	}
	if o.PageSize < 512 || o.PageSize > 65536 || o.PageSize&(o.PageSize-1) != 0 {
		errs = append(errs, fmt.Errorf("sqlite: Options.PageSize %d: want a power of two from 512 to 65536", o.PageSize))
	}
	return errors.Join(errs...)
}
