package storetest

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/superstep/superstep/store"
)

// testViewRead: ResponseView (store.ResponseViewReader, optional) reads a
// response as ResponseGet does but for its request and recorded input,
// which it leaves nil: responses with a short and a long request (and
// input), one whose long snapshot a lifecycle event carries, one
// cancelled; an unknown response is ErrNotFound.
func testViewRead(t *testing.T, h Harness) {
	t.Parallel()
	b := h.setup(t)
	vr, ok := b.s.(store.ResponseViewReader)
	if !ok {
		return // optional
	}
	long, _ := json.Marshal(strings.Repeat("a long \"input\" <x> & more\n", 4000)) // ~110 KB
	var ids []string
	for _, tc := range []struct {
		name        string
		request     []byte
		input       []byte
		longSnap    bool
		cancel      bool
		commitFinal bool
	}{
		{name: "short"},
		{name: "long request and input", request: []byte(`{"model":"test-model","input":` + string(long) + `}`),
			input: []byte(`[{"type":"message","role":"user","content":` + string(long) + `}]`)},
		{name: "long snapshot", longSnap: true, commitFinal: true},
		{name: "cancelled", cancel: true},
	} {
		p := ResponseParams(nil)
		if tc.request != nil {
			p.Response.Request, p.Response.Input = tc.request, tc.input
		}
		id := p.Response.ID
		if tc.longSnap {
			snap := longSnapshot(id, store.StatusInProgress, long)
			p.Response.Snapshot = snap
			p.Events = []store.EventInput{{Seq: 0, Type: "response.created", Payload: lifecycle("response.created", 0, snap)}}
		}
		res, err := b.s.ResponseCreate(b.ctx, p)
		requireNoError(t, err, tc.name+": ResponseCreate")
		if tc.commitFinal {
			c := NextCommit(b.ctx, t, b.s, res.Run.ID, &CommitOpts{Status: store.StatusCompleted, NoEvents: true})
			done := longSnapshot(id, store.StatusCompleted, long)
			c.Events = []store.EventInput{{Seq: 1, Type: "response.completed", Payload: lifecycle("response.completed", 1, done)}}
			c.Snapshot = done
			_, err := b.s.Commit(b.ctx, c)
			requireNoError(t, err, tc.name+": Commit")
		}
		if tc.cancel {
			_, err := b.s.ResponseCancel(b.ctx, id)
			requireNoError(t, err, tc.name+": ResponseCancel")
		}
		ids = append(ids, id)
	}
	check := func(what string) {
		for _, id := range ids {
			full, err := b.s.ResponseGet(b.ctx, id)
			requireNoError(t, err, what+": ResponseGet")
			view, err := vr.ResponseView(b.ctx, id)
			requireNoError(t, err, what+": ResponseView")
			if view.Request != nil || view.Input != nil {
				t.Fatalf("%s: ResponseView(%s) has a request (%d bytes) or input (%d bytes)", what, id, len(view.Request), len(view.Input))
			}
			want := *full
			want.Request, want.Input = nil, nil
			if !reflect.DeepEqual(*view, want) {
				t.Fatalf("%s: ResponseView(%s) =\n%+v\nResponseGet without request and input =\n%+v", what, id, *view, want)
			}
		}
	}
	check("written")
	h.reopen(t, b)
	vr = b.s.(store.ResponseViewReader)
	check("after a reopen")
	_, err := vr.ResponseView(b.ctx, "resp_unknown")
	requireIs(t, err, store.ErrNotFound, "ResponseView of an unknown response")
}
