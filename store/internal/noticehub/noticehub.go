// Package noticehub fans store notices out to subscribers without ever
// blocking the publisher; the store backends share it.
package noticehub

import (
	"context"
	"sync"

	"github.com/superstep/superstep/store"
)

// Hub fans notices out to the subscribers of a store's Notices. Sends
// never block the publisher (a listener goroutine, a committing caller): a
// subscriber whose buffer is full misses notices and gets a
// store.NoticeResync at the next one that fits. The zero value is ready.
type Hub struct {
	mu     sync.Mutex
	subs   map[*noticeSub]struct{}
	closed bool
}

type noticeSub struct {
	ch   chan store.Notice
	lost bool // a notice was dropped: send NoticeResync first
}

// Subscribe adds a subscriber with room for buffer notices, removed (its
// channel closed) when ctx ends or the hub closes.
func (h *Hub) Subscribe(ctx context.Context, buffer int) <-chan store.Notice {
	sub := &noticeSub{ch: make(chan store.Notice, max(buffer, 1))}
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		close(sub.ch)
		return sub.ch
	}
	if h.subs == nil {
		h.subs = make(map[*noticeSub]struct{})
	}
	h.subs[sub] = struct{}{}
	h.mu.Unlock()
	context.AfterFunc(ctx, func() { h.remove(sub) })
	return sub.ch
}

// remove closes sub's channel unless the hub already did.
func (h *Hub) remove(sub *noticeSub) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.subs[sub]; ok {
		delete(h.subs, sub)
		close(sub.ch)
	}
}

// Publish delivers n to every subscriber with room for it.
func (h *Hub) Publish(n store.Notice) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for sub := range h.subs {
		sub.send(n)
	}
}

func (sub *noticeSub) send(n store.Notice) {
	if sub.lost {
		select {
		case sub.ch <- store.Notice{Kind: store.NoticeResync}:
			sub.lost = false
		default:
			return
		}
	}
	select {
	case sub.ch <- n:
	default:
		sub.lost = true
	}
}

// Close closes every subscriber's channel; later subscriptions get a
// closed channel.
func (h *Hub) Close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	for sub := range h.subs {
		delete(h.subs, sub)
		close(sub.ch)
	}
}
