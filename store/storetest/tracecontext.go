package storetest

import (
	"testing"

	"github.com/superstep/superstep/store"
)

// testTraceContext: Response.TraceContext is written by ResponseCreate and
// never changed, like Publication and Input: commits, a cancel and the
// terminal commit keep it, every reader returns it, and a response created
// without it (a continuation of a traced one too) reads "".
func testTraceContext(t *testing.T, h Harness) {
	t.Parallel()
	b := h.setup(t)
	const tc = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\nvendor=é,x=1"
	p := ResponseParams(nil)
	p.Response.TraceContext = tc
	c, err := b.s.ResponseCreate(b.ctx, p)
	requireNoError(t, err, "ResponseCreate")
	check := func(id, want, what string) {
		t.Helper()
		got, err := b.s.ResponseGet(b.ctx, id)
		requireNoError(t, err, "ResponseGet "+what)
		if got.TraceContext != want {
			t.Fatalf("ResponseGet %s: TraceContext %q, want %q", what, got.TraceContext, want)
		}
		resps, err := b.s.ResponseListByRun(b.ctx, got.RunID)
		requireNoError(t, err, "ResponseListByRun "+what)
		for _, r := range resps {
			if r.ID == id {
				if r.TraceContext != want {
					t.Fatalf("ResponseListByRun %s: TraceContext %q, want %q", what, r.TraceContext, want)
				}
				return
			}
		}
		t.Fatalf("ResponseListByRun %s: %s not listed", what, id)
	}
	if c.Response.TraceContext != tc {
		t.Fatalf("the create's result: TraceContext %q, want %q", c.Response.TraceContext, tc)
	}
	check(c.Response.ID, tc, "after create")
	Commit(b.ctx, t, b.s, c.Run.ID, nil)
	check(c.Response.ID, tc, "after a commit")
	cancelled, err := b.s.ResponseCancel(b.ctx, c.Response.ID)
	requireNoError(t, err, "ResponseCancel")
	if cancelled.TraceContext != tc {
		t.Fatalf("ResponseCancel's result: TraceContext %q, want %q", cancelled.TraceContext, tc)
	}
	Commit(b.ctx, t, b.s, c.Run.ID, &CommitOpts{Status: store.StatusCancelled})
	check(c.Response.ID, tc, "after the terminal commit")

	// A continuation has a trace context of its own (here none).
	cont := CreateResponse(b.ctx, t, b.s, &ResponseOpts{RunID: c.Run.ID, PreviousResponseID: c.Response.ID})
	check(cont.Response.ID, "", "of a continuation created without one")
	check(c.Response.ID, tc, "of the first response after a continuation")
	requireNoError(t, store.Check(b.ctx, b.s), "Check")
}
