package postgres

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/superstep/superstep/store"
)

var _ store.Notifier = (*Store)(nil)

// noticePrefix starts the payload of a notice on the event channel; event
// announcements carry a bare response id. Sharing the one channel keeps one
// LISTEN per host and the channel rules of Options.Channel unchanged. An
// event announcement for a response whose id starts with the prefix would
// at worst wake nobody and publish a notice that decodes to nothing.
const noticePrefix = "!n"

// noticeWire is a notice as sent through NOTIFY.
type noticeWire struct {
	Kind       store.NoticeKind `json:"k"`
	RunID      string           `json:"r,omitempty"`
	ResponseID string           `json:"p,omitempty"`
}

// encodeNotice returns n's NOTIFY payload.
func encodeNotice(n store.Notice) string {
	b, _ := json.Marshal(noticeWire{Kind: n.Kind, RunID: n.RunID, ResponseID: n.ResponseID}) // cannot fail
	return noticePrefix + string(b)
}

// decodeNotice parses a payload made by encodeNotice; false for an event
// announcement.
func decodeNotice(payload string) (store.Notice, bool) {
	rest, ok := strings.CutPrefix(payload, noticePrefix)
	if !ok {
		return store.Notice{}, false
	}
	var w noticeWire
	if err := json.Unmarshal([]byte(rest), &w); err != nil || w.Kind < store.NoticeCancel || w.Kind > store.NoticeRunReady {
		return store.Notice{}, false
	}
	return store.Notice{Kind: w.Kind, RunID: w.RunID, ResponseID: w.ResponseID}, true
}

// Notices subscribes to the cancels and ready runs announced by every
// handle on the database (see store.Notifier). They travel by NOTIFY on
// Options.Channel, sent right after the announcing write committed and
// batched like event announcements; a broken listener connection is
// followed by a NoticeResync.
func (s *Store) Notices(ctx context.Context, buffer int) <-chan store.Notice {
	return s.listen.notices.Subscribe(ctx, buffer)
}

// sendNotice queues n for every handle (this one included, through its
// listener) after the write it announces committed. A lost notice is
// covered by the subscribers' periodic checks.
func (s *Store) sendNotice(n store.Notice) {
	s.notify.addPayload(encodeNotice(n))
}
