package postgres

import (
	"context"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/superstep/superstep/internal/wait"
)

// notifier announces new events with NOTIFY after their transaction
// committed, batching the announcements of concurrent commits into one
// statement. NOTIFY inside a commit would hold PostgreSQL's notify-queue
// lock across the commit's WAL flush and so serialise every committing
// transaction of the database; after the commit it costs no commit latency.
// Readers in this process are woken at once; readers on other hosts up to
// Options.NotifyInterval later. A crash between a commit and its
// announcement delays remote readers by at most Options.PollInterval
// (EventWait re-checks that often).
type notifier struct {
	s      *Store
	mu     sync.Mutex
	ids    map[string]struct{} // NOTIFY payloads: response ids and notices
	kick   chan struct{}
	cancel context.CancelFunc
	done   chan struct{}
}

func startNotifier(s *Store) *notifier {
	ctx, cancel := context.WithCancel(context.Background())
	n := &notifier{s: s, ids: make(map[string]struct{}), kick: make(chan struct{}, 1), cancel: cancel,
		done: make(chan struct{})}
	go n.run(ctx)
	return n
}

// add queues an announcement for responseID and wakes local waiters at
// once.
func (n *notifier) add(responseID string) {
	n.s.listen.wake(responseID)
	n.mu.Lock()
	n.ids[responseID] = struct{}{}
	n.mu.Unlock()
	signal(n.kick)
}

// addPayload queues a raw NOTIFY payload (a notice) for the next flush.
func (n *notifier) addPayload(payload string) {
	n.mu.Lock()
	n.ids[payload] = struct{}{}
	n.mu.Unlock()
	signal(n.kick)
}

// run sends queued announcements until ctx ends, then flushes the rest.
// Flushes are at least Options.NotifyInterval apart: each NOTIFY wakes
// every listening backend of the database, so announcements of commits
// close together share one statement.
func (n *notifier) run(ctx context.Context) {
	defer close(n.done)
	for {
		select {
		case <-n.kick:
			n.flush(ctx)
			if !wait.Sleep(ctx, n.s.opts.NotifyInterval) {
				continue // ctx ended: the next select flushes and returns
			}
		case <-ctx.Done():
			fctx, cancel := context.WithTimeout(context.Background(), time.Second)
			n.flush(fctx)
			cancel()
			return
		}
	}
}

// flush sends every queued announcement in one statement. On failure they
// are dropped: readers fall back to EventWait's periodic re-check.
func (n *notifier) flush(ctx context.Context) {
	n.mu.Lock()
	ids := make([]string, 0, len(n.ids))
	for id := range n.ids {
		ids = append(ids, id)
	}
	clear(n.ids)
	n.mu.Unlock()
	if len(ids) == 0 {
		return
	}
	_, _ = n.s.pool.Exec(ctx, notifySQL, n.s.opts.Channel, ids)
}

// notifySQL sends the announcements of flush, in a transaction of its
// own that commits without waiting for its WAL flush
// (synchronous_commit off for it alone, set_config's is_local): a NOTIFY
// takes a transaction id, so with the server's synchronous_commit on each
// flush was one more synced commit, one per W1 workflow at concurrency 1
// (bench writes/wf 12 for 11 store writes). An announcement lost in a
// crash costs what a failed flush does: remote readers wait for their next
// poll. The writes it announces committed, synchronously, before it.
const notifySQL = "SELECT set_config('synchronous_commit', 'off', true), pg_notify($1, id) FROM unnest($2::text[]) AS id"

// stop flushes and ends the goroutine.
func (n *notifier) stop() {
	n.cancel()
	<-n.done
}

// txChannel is the channel the SQL functions notify in the writing
// transaction: Options.Channel with NotifyInCommit, "" (none) otherwise.
func (s *Store) txChannel() string {
	if s.opts.NotifyInCommit {
		return s.opts.Channel
	}
	return ""
}

// announce tells readers that responseID has new events (or is gone) after
// a successful write; with NotifyInCommit the transaction already did.
func (s *Store) announce(responseID string) {
	if s.opts.NotifyInCommit {
		s.listen.wake(responseID)
		return
	}
	s.notify.add(responseID)
}

// notifyTx sends the announcement inside tx when NotifyInCommit is set.
func (s *Store) notifyTx(ctx context.Context, tx pgx.Tx, responseID string) error {
	if !s.opts.NotifyInCommit {
		return nil
	}
	_, err := tx.Exec(ctx, "SELECT pg_notify($1, $2)", s.opts.Channel, responseID)
	return err
}
