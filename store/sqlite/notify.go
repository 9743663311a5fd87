package sqlite

import (
	"context"
	"fmt"
	"sync"
)

// notifier wakes in-process EventWait callers when a response's log grows
// or the response goes away. Each watched response has one channel that is
// closed (and forgotten) on wake; waiters then re-read.
type notifier struct {
	mu struct {
		sync.Mutex
		watch  map[string]*watch
		closed bool
	}
}

type watch struct {
	ch      chan struct{}
	waiters int
}

// subscribe returns the channel closed at the next wake of id, and a
// function that must be called when the caller stops waiting.
func (n *notifier) subscribe(id string) (<-chan struct{}, func()) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.mu.closed {
		ch := make(chan struct{})
		close(ch)
		return ch, func() {}
	}
	if n.mu.watch == nil {
		n.mu.watch = make(map[string]*watch)
	}
	w := n.mu.watch[id]
	if w == nil {
		w = &watch{ch: make(chan struct{})}
		n.mu.watch[id] = w
	}
	w.waiters++
	return w.ch, func() {
		n.mu.Lock()
		defer n.mu.Unlock()
		w.waiters--
		if w.waiters == 0 && n.mu.watch[id] == w {
			delete(n.mu.watch, id)
		}
	}
}

// wake wakes the waiters of id.
func (n *notifier) wake(id string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if w := n.mu.watch[id]; w != nil {
		close(w.ch)
		delete(n.mu.watch, id)
	}
}

// closeAll wakes every waiter; later subscriptions return at once.
func (n *notifier) closeAll() {
	n.mu.Lock()
	defer n.mu.Unlock()
	for id, w := range n.mu.watch {
		close(w.ch)
		delete(n.mu.watch, id)
	}
	n.mu.closed = true
}

// EventWait blocks until the response has an event with Seq > after, the
// response is deleted, the store is closed or ctx ends. It returns nil in
// the first cases (callers re-read; it may return nil spuriously),
// ctx.Err() when ctx ended, and store.ErrNotFound when the response does not
// exist when it is called.
func (s *Store) EventWait(ctx context.Context, responseID string, after int64) error {
	ch, release := s.notify.subscribe(responseID)
	defer release()
	// Subscribed before reading, so a commit between the read and the wait
	// still wakes us.
	// Only next_seq: the whole row may hold a long request and snapshot.
	if err := s.checkOpen("event wait"); err != nil {
		return err
	}
	var next int64
	err := s.rdb.QueryRowContext(ctx, "SELECT next_seq FROM responses WHERE id = ?", responseID).Scan(&next)
	if err != nil {
		return mapError("event wait "+responseID, err)
	}
	if next-1 > after {
		return nil
	}
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("sqlite: event wait: %w", ctx.Err())
	}
}
