package postgres

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/superstep/superstep/internal/wait"
	"github.com/superstep/superstep/store"
	"github.com/superstep/superstep/store/internal/noticehub"
)

// listener owns the one connection per Store that LISTENs on the event
// channel, and fans notifications out to in-process waiters. Its goroutine
// runs from startListener until stop.
type listener struct {
	cc      *pgx.ConnConfig
	channel string
	cancel  context.CancelFunc
	done    chan struct{}

	mu      sync.Mutex
	waiters map[string]map[chan struct{}]struct{} // response id -> waiters

	// notices receives the notices among the notifications (see
	// notice.go).
	notices noticehub.Hub
}

const (
	listenRetryMin = 50 * time.Millisecond
	listenRetryMax = 5 * time.Second
)

// startListener connects, LISTENs and starts the goroutine. Waiters
// registered after it returns cannot miss a notification sent after their
// registration.
func startListener(ctx context.Context, cc *pgx.ConnConfig, channel string) (*listener, error) {
	l := &listener{cc: cc, channel: channel, done: make(chan struct{}),
		waiters: make(map[string]map[chan struct{}]struct{})}
	conn, err := l.connect(ctx)
	if err != nil {
		return nil, err
	}
	lctx, cancel := context.WithCancel(context.Background())
	l.cancel = cancel
	go l.run(lctx, conn)
	return l, nil
}

// connect opens the listening connection.
func (l *listener) connect(ctx context.Context) (*pgx.Conn, error) {
	conn, err := pgx.ConnectConfig(ctx, l.cc.Copy())
	if err != nil {
		return nil, fmt.Errorf("store/postgres: listener connect: %w", err)
	}
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{l.channel}.Sanitize()); err != nil {
		closeConn(conn)
		return nil, fmt.Errorf("store/postgres: listen %s: %w", l.channel, err)
	}
	return conn, nil
}

// run receives notifications until ctx ends. When the connection breaks it
// reconnects with backoff and wakes every waiter, since notifications sent
// meanwhile were lost (waiters re-read the log).
func (l *listener) run(ctx context.Context, conn *pgx.Conn) {
	defer close(l.done)
	backoff := listenRetryMin
	for {
		if conn == nil {
			var err error
			if conn, err = l.connect(ctx); err != nil {
				if !wait.Sleep(ctx, backoff) {
					return
				}
				backoff = min(2*backoff, listenRetryMax)
				continue
			}
			backoff = listenRetryMin
			l.wakeAll()
			l.notices.Publish(store.Notice{Kind: store.NoticeResync})
		}
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			closeConn(conn)
			conn = nil
			if ctx.Err() != nil {
				return
			}
			l.wakeAll()
			continue
		}
		if notice, ok := decodeNotice(n.Payload); ok {
			l.notices.Publish(notice)
			continue
		}
		l.wake(n.Payload)
	}
}

// stop ends the goroutine and waits for it and its connection.
func (l *listener) stop() {
	l.cancel()
	<-l.done
	l.wakeAll()
	l.notices.Close()
}

// closeConn closes conn and waits until its socket is released.
func closeConn(conn *pgx.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = conn.Close(ctx)
	<-conn.PgConn().CleanupDone()
}

// register adds a waiter for responseID; the returned func removes it.
func (l *listener) register(responseID string) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	l.mu.Lock()
	set := l.waiters[responseID]
	if set == nil {
		set = make(map[chan struct{}]struct{})
		l.waiters[responseID] = set
	}
	set[ch] = struct{}{}
	l.mu.Unlock()
	return ch, func() {
		l.mu.Lock()
		delete(set, ch)
		if cur, ok := l.waiters[responseID]; ok && len(cur) == 0 {
			delete(l.waiters, responseID)
		}
		l.mu.Unlock()
	}
}

// wake signals the waiters of one response.
func (l *listener) wake(responseID string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for ch := range l.waiters[responseID] {
		signal(ch)
	}
}

// wakeAll signals every waiter.
func (l *listener) wakeAll() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, set := range l.waiters {
		for ch := range set {
			signal(ch)
		}
	}
}

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}
