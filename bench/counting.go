package main

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/superstep/superstep/store"
)

// countingStore counts the calls superstep's host makes to its store, so
// that "one commit per superstep" is checked exactly, whatever else runs
// on the database server.
type countingStore struct {
	store.Store
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

// counting wraps st in a countingStore, returned as the store to give the
// host, and as itself for the counts: a store.CreateCommitter stays one
// (countingCreateCommitter), so the host still finds the capability.
func counting(st store.Store) (store.Store, *countingStore) {
	cs := &countingStore{Store: st}
	if cc, ok := st.(store.CreateCommitter); ok {
		return &countingCreateCommitter{countingStore: cs, cc: cc}, cs
	}
	return cs, cs
}

// countingCreateCommitter forwards CreateCommit, counted as one create and
// one commit (its time as commit time: it is the first superstep's
// commit, with the create riding in it).
type countingCreateCommitter struct {
	*countingStore
	cc store.CreateCommitter
}

func (s *countingCreateCommitter) CreateCommit(ctx context.Context, c *store.ResponseCreateParams, p *store.CommitParams) (*store.ResponseCreateResult, *store.CommitResult, error) {
	s.creates.Add(1)
	s.commits.Add(1)
	t0 := time.Now()
	cr, r, err := s.cc.CreateCommit(ctx, c, p)
	s.commitTime.Add(int64(time.Since(t0)))
	return cr, r, err
}

// Exclusive forwards the optional capability the host looks for.
func (s *countingStore) Exclusive() bool {
	ex, ok := s.Store.(interface{ Exclusive() bool })
	return ok && ex.Exclusive()
}

func (s *countingStore) Commit(ctx context.Context, p *store.CommitParams) (*store.CommitResult, error) {
	s.commits.Add(1)
	t0 := time.Now()
	r, err := s.Store.Commit(ctx, p)
	s.commitTime.Add(int64(time.Since(t0)))
	return r, err
}

func (s *countingStore) ResponseCreate(ctx context.Context, p *store.ResponseCreateParams) (*store.ResponseCreateResult, error) {
	s.creates.Add(1)
	t0 := time.Now()
	r, err := s.Store.ResponseCreate(ctx, p)
	s.createTime.Add(int64(time.Since(t0)))
	return r, err
}

func (s *countingStore) EventAppend(ctx context.Context, p *store.EventAppendParams) error {
	s.otherWrites.Add(1)
	return s.Store.EventAppend(ctx, p)
}

func (s *countingStore) LeaseClaim(ctx context.Context, p *store.LeaseClaimParams) ([]*store.Run, error) {
	s.otherWrites.Add(1)
	return s.Store.LeaseClaim(ctx, p)
}

func (s *countingStore) LeaseRenew(ctx context.Context, p *store.LeaseParams) (time.Time, error) {
	s.otherWrites.Add(1)
	return s.Store.LeaseRenew(ctx, p)
}

func (s *countingStore) LeaseRelease(ctx context.Context, p *store.LeaseParams) error {
	s.otherWrites.Add(1)
	return s.Store.LeaseRelease(ctx, p)
}

func (s *countingStore) ResponseGet(ctx context.Context, id string) (*store.Response, error) {
	s.reads.Add(1)
	return s.Store.ResponseGet(ctx, id)
}

func (s *countingStore) EventList(ctx context.Context, p *store.EventListParams) ([]store.Event, error) {
	s.reads.Add(1)
	return s.Store.EventList(ctx, p)
}

func (s *countingStore) EventWait(ctx context.Context, id string, after int64) error {
	s.reads.Add(1)
	return s.Store.EventWait(ctx, id, after)
}
