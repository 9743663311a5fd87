// Package sqlite is superstep's embedded store: one SQLite file in WAL mode,
// written through one connection that group-commits the writes of
// concurrent runs in one transaction and one fsync, and read through a
// separate pool. The goroutine of one of the waiting callers (the leader)
// runs each batch, so a lone write pays no goroutine handoff.
//
// # Durability
//
// With Synchronous FULL (the default) a write that returned survives a power
// loss; with NORMAL it survives a process crash. Checkpoint parts are stored
// once per run by their SHA-256, so a commit writes only the parts that
// changed.
//
// # Caveats
//
// One process owns a database file at a time: Open takes an exclusive flock
// on its lock file (LockPath: the path with "-lock" appended, created next
// to the database and left there) and fails with ErrLocked when another
// process holds it. The database file itself is opened only by SQLite. Because of
// that, Open releases every lease left in the file (their holders are
// gone), so recovery claims unfinished runs at once; epochs are kept.
// OpenReadOnly takes no lock and writes nothing, for inspecting a file a
// server holds (`superstep check`). EventWait is
// woken in-process only, which is all a single-process store needs. The
// driver is github.com/mattn/go-sqlite3 (cgo); see docs/sqlite-driver.md.
package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"os"
	"sync"
	"sync/atomic"

	_ "github.com/mattn/go-sqlite3" // the database/sql driver "sqlite3"

	"github.com/superstep/superstep/store"
	"github.com/superstep/superstep/store/internal/noticehub"
)

var _ store.Store = (*Store)(nil)

// Store is a store.Store in one SQLite file. Open it with Open; it is safe
// for concurrent use.
type Store struct {
	path string
	opts *Options
	lock *os.File
	wdb  *sql.DB // the writer's single connection
	// wconn is wdb's connection, held from Open to Close: the writer
	// runs its transactions on it with BEGIN IMMEDIATE and COMMIT
	// statements, not as *sql.Tx. database/sql starts a goroutine for
	// every Tx (and for every query in one, its context being
	// cancellable), and each start woke another thread: on the writer's
	// path, that was ~15 µs per transaction and a few per query.
	wconn *sql.Conn
	rdb   *sql.DB // the read pool
	// mu guards the write queue: the writes waiting for a batch, and
	// whether a leader is committing one (see writeWake). idle is
	// signalled when the leadership ends.
	mu      sync.Mutex
	queue   []*request
	leading bool
	idle    sync.Cond

	notify    notifier
	notices   noticehub.Hub // Notices subscribers (hosts.go)
	stats     struct{ transactions, writes, redone atomic.Int64 }
	closed    atomic.Bool
	readOnly  bool // OpenReadOnly: no writer, no lock
	closeOnce sync.Once
	closeErr  error
}

// Open opens (creating if needed) the superstep database at path, applies
// pending migrations and readies the write queue. A nil opts means the
// defaults. Errors: ErrLocked when another process holds the file,
// ErrNotSuperstep when the file is not a superstep database, ErrTooNew when
// a newer superstep wrote it.
func Open(ctx context.Context, path string, opts *Options) (*Store, error) {
	o := opts.WithDefaults()
	if err := o.validate(); err != nil {
		return nil, err
	}
	lock, err := lockFile(path)
	if err != nil {
		return nil, err
	}
	s := &Store{path: path, opts: o, lock: lock}
	s.idle.L = &s.mu
	if err := s.openDBs(ctx); err != nil {
		s.closeDBs()
		return nil, err
	}
	return s, nil
}

// openDBs opens and migrates the writer connection, then the read pool.
func (s *Store) openDBs(ctx context.Context) error {
	ms := s.opts.BusyTimeout.Milliseconds()
	w := url.Values{"_cache_size": {"-16384"}, "_stmt_cache_size": {"64"}, "_txlock": {"immediate"}, "_busy_timeout": {fmt.Sprint(ms)}, "_synchronous": {string(s.opts.Synchronous)}}
	var err error
	if s.wdb, err = sql.Open("sqlite3", "file:"+s.path+"?"+w.Encode()); err != nil {
		return mapError("open "+s.path, err)
	}
	s.wdb.SetMaxOpenConns(1)
	s.wdb.SetMaxIdleConns(1)
	s.wdb.SetConnMaxLifetime(0)
	if err := migrate(ctx, s.wdb, s.path, s.opts.PageSize); err != nil {
		return err
	}
	if err := releaseLeases(ctx, s.wdb); err != nil {
		return err
	}
	// The writer's one connection lives as long as the store, so a
	// per-connection pragma set once holds.
	// journal_size_limit truncates the WAL after a checkpoint that left it
	// larger (a 10 MB checkpoint grows it past the autocheckpoint size);
	// in the file's page size, which Options.PageSize sets only for a new
	// file (one made with 1 KB pages keeps them).
	var pageSize int
	if err := s.wdb.QueryRowContext(ctx, "PRAGMA page_size").Scan(&pageSize); err != nil {
		return mapError("read page size", err)
	}
	for _, q := range []string{
		fmt.Sprintf("PRAGMA wal_autocheckpoint = %d", s.opts.WALAutocheckpoint),
		fmt.Sprintf("PRAGMA journal_size_limit = %d", 4*s.opts.WALAutocheckpoint*pageSize),
	} {
		if _, err := s.wdb.ExecContext(ctx, q); err != nil {
			return mapError(q, err)
		}
	}
	if s.wconn, err = s.wdb.Conn(ctx); err != nil {
		return mapError("open "+s.path, err)
	}
	r := url.Values{"_stmt_cache_size": {"64"}, "_txlock": {"deferred"}, "_busy_timeout": {fmt.Sprint(ms)}, "_query_only": {"1"}}
	if s.rdb, err = sql.Open("sqlite3", "file:"+s.path+"?"+r.Encode()); err != nil {
		return mapError("open "+s.path, err)
	}
	s.rdb.SetMaxOpenConns(s.opts.ReadConns)
	s.rdb.SetMaxIdleConns(s.opts.ReadConns)
	return mapError("open "+s.path, s.rdb.PingContext(ctx))
}

// Stats counts the writer's work since Open.
type Stats struct {
	// Transactions is how many batches the writer committed or tried to:
	// each is one transaction (one fsync with Synchronous FULL), except
	// a redone batch, whose first transaction was rolled back (see
	// Redone), which counts once.
	Transactions int64
	// Writes is how many write calls (Commit, EventAppend, ResponseCreate,
	// ...) those transactions carried; Writes/Transactions is the mean
	// group-commit batch.
	Writes int64
	// Redone is how many batches were applied a second time, in a second
	// transaction (counted when it began), because one of their writes
	// failed (the writer applies a batch without a SAVEPOINT per write
	// first; see runBatch).
	Redone int64
}

// Stats returns the writer's counters.
func (s *Store) Stats() Stats {
	return Stats{Transactions: s.stats.transactions.Load(), Writes: s.stats.writes.Load(), Redone: s.stats.redone.Load()}
}

// releaseLeases releases every lease at Open. This process holds the
// file's exclusive lock, so the processes that held those leases are gone:
// their runs can be claimed at once instead of after the leases expire.
// Epochs are kept, so a write made under an old lease stays fenced.
//
// The host registry is emptied for the same reason.
func releaseLeases(ctx context.Context, db *sql.DB) error {
	_, err := db.ExecContext(ctx, "UPDATE runs SET lease_owner = '', lease_expires_at = 0 WHERE lease_owner != ''")
	if err != nil {
		return mapError("release leases of a previous process", err)
	}
	if err := releaseWebhookClaims(ctx, db); err != nil {
		return err
	}
	_, err = db.ExecContext(ctx, "DELETE FROM hosts")
	return mapError("remove the hosts of a previous process", err)
}

// Path returns the database file's path.
func (s *Store) Path() string { return s.path }

// Close waits for the batch in flight, closes the database and
// releases the file lock. Writes still queued fail with store.ErrClosed.
// Close is idempotent.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closed.Store(true)
		for s.leading {
			s.idle.Wait()
		}
		s.mu.Unlock()
		s.notify.closeAll()
		s.notices.Close()
		s.closeErr = s.closeDBs()
	})
	return s.closeErr
}

// closeDBs closes whatever Open managed to open.
func (s *Store) closeDBs() error {
	var err error
	if s.rdb != nil {
		err = s.rdb.Close()
	}
	if s.wconn != nil {
		if e := s.wconn.Close(); err == nil {
			err = e
		}
	}
	if s.wdb != nil {
		if e := s.wdb.Close(); err == nil {
			err = e
		}
	}
	if s.lock != nil {
		if e := unlockFile(s.lock); err == nil {
			err = e
		}
	}
	return mapError("close", err)
}

// checkOpen returns store.ErrClosed after Close.
func (s *Store) checkOpen(op string) error {
	if s.closed.Load() {
		return fmt.Errorf("sqlite: %s: %w", op, store.ErrClosed)
	}
	return nil
}
