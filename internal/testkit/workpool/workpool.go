// Package workpool keeps a number of workloads running in goroutines while
// a test does something else to the system under test (kills its servers,
// say), remembers every workload it started so the test can check them
// all at the end, and waits for them with a bound, so a workload that
// hangs fails the test instead of stalling it.
//
// It is a test harness (see internal/testkit): only tests import it.
package workpool

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// Pool runs workloads of type W. Its methods are safe for concurrent use;
// Fill is meant to be called from one goroutine.
type Pool[W any] struct {
	ctx    context.Context
	cancel context.CancelFunc
	run    func(context.Context, W)
	wg     sync.WaitGroup
	live   atomic.Int64
	mu     struct {
		sync.Mutex
		all []W
	}
}

// New returns a pool whose workloads run as run(wctx, w) in goroutines of
// their own; wctx is a child of ctx that Wait and Stop cancel.
func New[W any](ctx context.Context, run func(context.Context, W)) *Pool[W] {
	p := &Pool[W]{run: run}
	p.ctx, p.cancel = context.WithCancel(ctx)
	return p
}

// Add records w without running it: a workload the test ran itself (a
// reference run), to be checked with the others.
func (p *Pool[W]) Add(w W) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mu.all = append(p.mu.all, w)
}

// Fill starts workloads until n of those it started are running. Each is
// made by next(i), i being the number of workloads recorded before it, and
// recorded.
func (p *Pool[W]) Fill(n int, next func(i int) W) {
	for p.live.Load() < int64(n) {
		p.mu.Lock()
		w := next(len(p.mu.all))
		p.mu.all = append(p.mu.all, w)
		p.mu.Unlock()
		p.live.Add(1)
		p.wg.Go(func() {
			defer p.live.Add(-1)
			p.run(p.ctx, w)
		})
	}
}

// Running returns the number of workloads running.
func (p *Pool[W]) Running() int { return int(p.live.Load()) }

// Wait waits for every workload started to return and reports whether
// they all did within d; if not, it cancels their context and waits for
// them to give up before it returns false.
func (p *Pool[W]) Wait(d time.Duration) bool {
	done := make(chan struct{})
	go func() { // owned by Wait: ends when every workload has returned
		p.wg.Wait()
		close(done)
	}()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
		p.cancel()
		<-done
		return false
	}
}

// Stop cancels the workloads' context. A test defers it, so that workloads
// still running when it fails give up.
func (p *Pool[W]) Stop() { p.cancel() }

// All returns every workload recorded, in the order recorded.
func (p *Pool[W]) All() []W {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]W(nil), p.mu.all...)
}
