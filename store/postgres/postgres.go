package postgres

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/superstep/superstep/store"
)

// Store is a store.Store on PostgreSQL. Open it with Open; it is safe for
// concurrent use by any number of goroutines and hosts.
type Store struct {
	pool    *pgxpool.Pool
	leases  *pgxpool.Pool // lease renewals and heartbeats only (Options.LeaseConns)
	opts    Options
	closed  atomic.Bool
	parts   *partCache
	listen  *listener
	notify  *notifier
	appends *appender
	commits *committer
	closeMu sync.Mutex
	// resumeFailed holds the runs this handle claimed with failed resumes
	// recorded (Run.Resume): their next commit also resets Resume. Only
	// the lease holder commits, and it claimed through this handle.
	resumeFailed sync.Map // run ID -> struct{}
}

var _ store.Store = (*Store)(nil)

// Open connects to the database at url (a PostgreSQL URL or keyword/value
// string; a search_path=name parameter in it names the schema when
// Options.Schema is empty), creates the schema if missing, applies pending
// migrations and starts the event listener. It fails when the schema was written by a newer
// version of superstep or holds tables that are not superstep's.
func Open(ctx context.Context, url string, opts *Options) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("store/postgres: parse url: %w", err)
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	if sp := cfg.ConnConfig.RuntimeParams["search_path"]; o.Schema == "" && identifierRE.MatchString(sp) {
		o.Schema = sp // a URL's search_path=name names the schema
	}
	o = o.withDefaults()
	if err := o.validate(); err != nil {
		return nil, err
	}
	if o.MaxConns > 0 {
		cfg.MaxConns = o.MaxConns
	}
	if o.Schema != "" {
		if err := createSchema(ctx, cfg.ConnConfig, o.Schema); err != nil {
			return nil, err
		}
		cfg.ConnConfig.RuntimeParams["search_path"] = pgx.Identifier{o.Schema}.Sanitize()
	}
	leaseCfg := cfg.Copy()
	if o.tracer != nil {
		cfg.ConnConfig.Tracer = o.tracer
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("store/postgres: connect: %w", err)
	}
	leaseCfg.MaxConns = o.LeaseConns
	leaseCfg.MinConns = 0
	leases, err := pgxpool.NewWithConfig(ctx, leaseCfg)
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("store/postgres: connect: %w", err)
	}
	s := &Store{pool: pool, leases: leases, opts: o, parts: newPartCache(o.CacheRuns)}
	s.commits = &committer{s: s}
	if err := migrate(ctx, pool, o.Schema); err != nil {
		pool.Close()
		leases.Close()
		return nil, err
	}
	s.listen, err = startListener(ctx, cfg.ConnConfig, o.Channel)
	if err != nil {
		pool.Close()
		leases.Close()
		return nil, err
	}
	s.notify = startNotifier(s)
	s.appends = startAppender(s)
	return s, nil
}

// createSchema creates schema through a short-lived connection (the pool's
// connections set it as search_path, so it must exist first).
func createSchema(ctx context.Context, cc *pgx.ConnConfig, schema string) error {
	conn, err := pgx.ConnectConfig(ctx, cc.Copy())
	if err != nil {
		return fmt.Errorf("store/postgres: connect: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	_, err = conn.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+pgx.Identifier{schema}.Sanitize())
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && (pgErr.Code == codeUnique || pgErr.Code == "42P06") {
		err = nil // created concurrently by another host's Open
	}
	if err != nil {
		return fmt.Errorf("store/postgres: create schema %s: %w", schema, err)
	}
	return nil
}

// Close stops the listener and closes the pool, waiting for both. Calls
// after Close fail with store.ErrClosed.
func (s *Store) Close() error {
	s.closeMu.Lock()
	defer s.closeMu.Unlock()
	if s.closed.Swap(true) {
		return nil
	}
	s.appends.stop()
	s.notify.stop()
	s.listen.stop()
	s.pool.Close()
	s.leases.Close()
	return nil
}

// write runs fn on a pooled connection. Waiting for the connection ends
// with ctx; once fn may have sent a write, ctx's cancellation no longer
// interrupts it (Options.WriteTimeout still bounds it): an interrupted
// round trip would leave the caller not knowing whether the write
// committed, and the contract is that an error means nothing is visible.
func (s *Store) write(ctx context.Context, fn func(ctx context.Context, conn *pgxpool.Conn) error) error {
	return s.writeOn(ctx, s.pool, fn)
}

// writeOn is write on a given pool.
func (s *Store) writeOn(ctx context.Context, pool *pgxpool.Pool, fn func(ctx context.Context, conn *pgxpool.Conn) error) error {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.opts.WriteTimeout)
	defer cancel()
	return fn(wctx, conn)
}

// writeTx runs fn in a transaction under write's rules.
func (s *Store) writeTx(ctx context.Context, fn func(ctx context.Context, tx pgx.Tx) error) error {
	return s.write(ctx, func(ctx context.Context, conn *pgxpool.Conn) error {
		return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error { return fn(ctx, tx) })
	})
}

// begin checks that s is open and returns the effective time of a call:
// now, or the host's clock when now is zero.
func (s *Store) begin(now time.Time) (time.Time, error) {
	if s.closed.Load() {
		return time.Time{}, store.ErrClosed
	}
	if now.IsZero() {
		now = s.opts.HostClock()
	}
	return normTime(now), nil
}

// normTime returns now (or the current time when zero) at PostgreSQL's
// microsecond precision, in UTC, so values read back compare equal.
func normTime(now time.Time) time.Time {
	if now.IsZero() {
		now = time.Now()
	}
	return now.UTC().Truncate(time.Microsecond)
}
