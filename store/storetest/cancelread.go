package storetest

import (
	"testing"

	"github.com/superstep/superstep/store"
)

// testCancelRead: a store.ResponseCancelReader reads CancelRequested as
// ResponseGet does: false, then true once ResponseCancel recorded the
// cancel; store.ErrNotFound for an unknown response.
func testCancelRead(t *testing.T, h Harness) {
	t.Parallel()
	b := h.setup(t)
	cr, ok := b.s.(store.ResponseCancelReader)
	if !ok {
		return // optional
	}
	c := CreateResponse(b.ctx, t, b.s, nil)
	got, err := cr.ResponseCancelRequested(b.ctx, c.Response.ID)
	requireNoError(t, err, "ResponseCancelRequested")
	if got {
		t.Fatal("ResponseCancelRequested = true before ResponseCancel")
	}
	_, err = b.s.ResponseCancel(b.ctx, c.Response.ID)
	requireNoError(t, err, "ResponseCancel")
	got, err = cr.ResponseCancelRequested(b.ctx, c.Response.ID)
	requireNoError(t, err, "ResponseCancelRequested")
	if !got {
		t.Fatal("ResponseCancelRequested = false after ResponseCancel")
	}
	_, err = cr.ResponseCancelRequested(b.ctx, "resp_unknown")
	requireIs(t, err, store.ErrNotFound, "ResponseCancelRequested of an unknown response")
}
