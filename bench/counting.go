package main

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/superstep/superstep/store"
	"github.com/superstep/superstep/store/postgres"
	"github.com/superstep/superstep/store/sqlite"
)

// countingStore counts the calls superstep's host makes to its store, so
// that "one commit per superstep" is checked exactly, whatever else runs
// on the database server. Its methods are the counted ones only; the
// store given to the host (countedSQLite, countedPostgres) has every
// other method, optional capabilities included, straight from the store.
type countingStore struct {
	inner                                store.Store
	commits, creates, otherWrites, reads atomic.Int64
	// commitTime and createTime add up the wall time of Commit and
	// ResponseCreate calls (-store-stats).
	commitTime, createTime atomic.Int64
}

// storeCounts is what a system driving a countingStore reports.
type storeCounts struct {
	commits, creates, otherWrites, reads int64
	commitTime, createTime               time.Duration
}

func (s *countingStore) counts() storeCounts {
	return storeCounts{s.commits.Load(), s.creates.Load(), s.otherWrites.Load(), s.reads.Load(),
		time.Duration(s.commitTime.Load()), time.Duration(s.createTime.Load())}
}

// counting wraps st, one of superstep's stores, returned as the store to
// give the host, and the countingStore that counts its calls. The host
// finds in the wrapper every optional capability st has (Notifier,
// LeaseBatchRenewer, ResponseCancelReader, Clock, CreateCommitter, ...):
// the store's methods are promoted from one level deeper than the
// counted ones, which shadow them (TestCountingKeepsCapabilities).
func counting(st store.Store) (store.Store, *countingStore, error) {
	cs := &countingStore{inner: st}
	switch st := st.(type) {
	case *sqlite.Store:
		return &countedSQLite{cs, sqliteStore{st}}, cs, nil
	case *postgres.Store:
		return &countedPostgres{cs, postgresStore{st}}, cs, nil
	}
	return nil, nil, fmt.Errorf("bench: counting: %T is not one of superstep's stores", st)
}

type (
	sqliteStore   struct{ *sqlite.Store }
	postgresStore struct{ *postgres.Store }
	countedSQLite struct {
		*countingStore
		sqliteStore
	}
	countedPostgres struct {
		*countingStore
		postgresStore
	}
)

// CreateCommit counts one create and one commit (its time as commit time:
// it is the first superstep's commit, with the create riding in it). Both
// stores have it.
func (s *countingStore) CreateCommit(ctx context.Context, c *store.ResponseCreateParams, p *store.CommitParams) (*store.ResponseCreateResult, *store.CommitResult, error) {
	s.creates.Add(1)
	s.commits.Add(1)
	t0 := time.Now()
	cr, r, err := s.inner.(store.CreateCommitter).CreateCommit(ctx, c, p)
	s.commitTime.Add(int64(time.Since(t0)))
	return cr, r, err
}

func (s *countingStore) Commit(ctx context.Context, p *store.CommitParams) (*store.CommitResult, error) {
	s.commits.Add(1)
	t0 := time.Now()
	r, err := s.inner.Commit(ctx, p)
	s.commitTime.Add(int64(time.Since(t0)))
	return r, err
}

func (s *countingStore) ResponseCreate(ctx context.Context, p *store.ResponseCreateParams) (*store.ResponseCreateResult, error) {
	s.creates.Add(1)
	t0 := time.Now()
	r, err := s.inner.ResponseCreate(ctx, p)
	s.createTime.Add(int64(time.Since(t0)))
	return r, err
}

func (s *countingStore) EventAppend(ctx context.Context, p *store.EventAppendParams) error {
	s.otherWrites.Add(1)
	return s.inner.EventAppend(ctx, p)
}

func (s *countingStore) LeaseClaim(ctx context.Context, p *store.LeaseClaimParams) ([]*store.Run, error) {
	s.otherWrites.Add(1)
	return s.inner.LeaseClaim(ctx, p)
}

func (s *countingStore) LeaseRenew(ctx context.Context, p *store.LeaseParams) (time.Time, error) {
	s.otherWrites.Add(1)
	return s.inner.LeaseRenew(ctx, p)
}

// LeaseRenewBatch counts one write, as LeaseRenew: one call, one
// statement, however many runs it renews. Only PostgreSQL's store has it.
func (s *countedPostgres) LeaseRenewBatch(ctx context.Context, p *store.LeaseRenewBatchParams) ([]store.LeaseRenewResult, error) {
	s.otherWrites.Add(1)
	return s.postgresStore.LeaseRenewBatch(ctx, p)
}

func (s *countingStore) LeaseRelease(ctx context.Context, p *store.LeaseParams) error {
	s.otherWrites.Add(1)
	return s.inner.LeaseRelease(ctx, p)
}

func (s *countingStore) ResponseGet(ctx context.Context, id string) (*store.Response, error) {
	s.reads.Add(1)
	return s.inner.ResponseGet(ctx, id)
}

func (s *countingStore) EventList(ctx context.Context, p *store.EventListParams) ([]store.Event, error) {
	s.reads.Add(1)
	return s.inner.EventList(ctx, p)
}

func (s *countingStore) EventWait(ctx context.Context, id string, after int64) error {
	s.reads.Add(1)
	return s.inner.EventWait(ctx, id, after)
}
