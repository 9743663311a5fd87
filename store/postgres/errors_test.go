package postgres

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/superstep/superstep/store"
	"github.com/superstep/superstep/store/storetest"
)

// TestMapError_Transient: errors of a server that cannot be reached or
// cannot do the work now wrap store.ErrUnavailable, the driver's error
// kept in the chain; deterministic ones do not. The errors are real: a
// closed port, a backend terminated under a write, the store's own write
// timeout, a serialization failure.
func TestMapError_Transient(t *testing.T) {
	t.Parallel()
	requireDB(t)

	t.Run("ClosedPort", func(t *testing.T) {
		t.Parallel()
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		_, err = pgx.Connect(ctx, "postgres://postgres@"+addr+"/test?sslmode=disable")
		if err == nil {
			t.Fatalf("connected to closed port %s", addr)
		}
		err = mapError("connect", "", 0, err)
		var ce *pgconn.ConnectError
		if !errors.Is(err, store.ErrUnavailable) || !errors.As(err, &ce) {
			t.Fatalf("connect to a closed port: %v, want ErrUnavailable with the ConnectError", err)
		}
	})

	t.Run("TerminatedBackend", func(t *testing.T) {
		t.Parallel()
		s, c, admin := lockedRun(t, nil)
		done := make(chan error, 1)
		go func() { done <- renew(t.Context(), s, c) }()
		// The renewal waits for the row lock; terminate its backend.
		var pid int
		for pid == 0 {
			// The admin connection is inside its transaction, where
			// PostgreSQL keeps one snapshot of pg_stat_activity: clear it, or
			// a renewal whose backend started after the first look is never
			// seen.
			if _, err := admin.Exec(t.Context(), "SELECT pg_stat_clear_snapshot()"); err != nil {
				t.Fatal(err)
			}
			err := admin.QueryRow(t.Context(), `SELECT pid FROM pg_stat_activity
				WHERE wait_event_type = 'Lock' AND query LIKE '%lease_owner%' AND pid IN (
					SELECT pid FROM pg_locks WHERE relation = $1::regclass)`, s.opts.Schema+".runs").Scan(&pid)
			if err != nil && !errors.Is(err, pgx.ErrNoRows) {
				t.Fatal(err)
			}
			if pid == 0 {
				time.Sleep(5 * time.Millisecond) // polling pg_stat_activity: there is no signal
			}
		}
		if _, err := admin.Exec(t.Context(), "SELECT pg_terminate_backend($1)", pid); err != nil {
			t.Fatal(err)
		}
		err := <-done
		if !errors.Is(err, store.ErrUnavailable) || errors.Is(err, store.ErrFenced) {
			t.Fatalf("renewal whose backend was terminated: %v, want ErrUnavailable", err)
		}
		rollback(t, admin)
		if err := renew(t.Context(), s, c); err != nil {
			t.Fatalf("renewal once the server is back: %v", err)
		}
	})

	t.Run("WriteTimeout", func(t *testing.T) {
		t.Parallel()
		s, c, admin := lockedRun(t, &Options{WriteTimeout: 100 * time.Millisecond})
		err := renew(t.Context(), s, c)
		if !errors.Is(err, store.ErrUnavailable) {
			t.Fatalf("renewal past the store's write timeout: %v, want ErrUnavailable", err)
		}
		rollback(t, admin)
	})

	t.Run("SerializationFailure", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		ctx := t.Context()
		c := storetest.CreateResponse(ctx, t, s, nil)
		tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(context.WithoutCancel(ctx))
		var epoch int64
		if err := tx.QueryRow(ctx, "SELECT lease_epoch FROM runs WHERE id = $1", c.Run.ID).Scan(&epoch); err != nil {
			t.Fatal(err)
		}
		if _, err := s.pool.Exec(ctx, "UPDATE runs SET updated_at = now() WHERE id = $1", c.Run.ID); err != nil {
			t.Fatal(err)
		}
		_, err = tx.Exec(ctx, "UPDATE runs SET updated_at = now() WHERE id = $1", c.Run.ID)
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != codeSerialization {
			t.Fatalf("concurrent update under repeatable read: %v, want SQLSTATE 40001", err)
		}
		err = mapError("update", c.Run.ID, epoch, err)
		if !errors.Is(err, store.ErrUnavailable) || errors.Is(err, store.ErrConflict) {
			t.Fatalf("serialization failure: %v, want ErrUnavailable, not ErrConflict", err)
		}
	})

	t.Run("DuplicateIsDeterministic", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		ctx := t.Context()
		c := storetest.CreateResponse(ctx, t, s, nil)
		_, err := s.ResponseCreate(ctx, storetest.ResponseParams(&storetest.ResponseOpts{ID: c.Response.ID}))
		if !errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrUnavailable) {
			t.Fatalf("duplicate response id: %v, want ErrConflict and not ErrUnavailable", err)
		}
	})
}

// lockedRun returns a store (opened with opts) holding one run, and an
// admin connection whose open transaction holds that run's row lock, so
// that writes to the run wait.
func lockedRun(t *testing.T, opts *Options) (*Store, *store.ResponseCreateResult, *pgx.Conn) {
	t.Helper()
	// The response is created through a store with the default options: a
	// short WriteTimeout in opts is for the write under test, and a loaded
	// machine can take longer than that for the set-up.
	schema := newSchemaName(t)
	c := storetest.CreateResponse(t.Context(), t, openStore(t, schema, nil), nil)
	s := openStore(t, schema, opts)
	admin, err := pgx.Connect(t.Context(), testURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeConn(admin) })
	if _, err := admin.Exec(t.Context(), "BEGIN"); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Exec(t.Context(), "SELECT 1 FROM "+pgx.Identifier{s.opts.Schema, "runs"}.Sanitize()+
		" WHERE id = $1 FOR UPDATE", c.Run.ID); err != nil {
		t.Fatal(err)
	}
	return s, c, admin
}

// renew renews the run's lease as its owner.
func renew(ctx context.Context, s *Store, c *store.ResponseCreateResult) error {
	_, err := s.LeaseRenew(ctx, &store.LeaseParams{RunID: c.Run.ID, Owner: storetest.LeaseOwnerDefault,
		Epoch: c.Run.Lease.Epoch, Duration: time.Minute})
	return err
}

// rollback ends the admin connection's transaction.
func rollback(t *testing.T, admin *pgx.Conn) {
	t.Helper()
	if _, err := admin.Exec(t.Context(), "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
}
