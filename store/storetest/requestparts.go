package storetest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/superstep/superstep/internal/jsonstr"
	"github.com/superstep/superstep/store"
)

// testRequestParts: a new run's first checkpoint whose part holds the
// request's long input (as the workflow engine queues it for the start
// executor) reads back byte for byte, written by ResponseCreate or by
// CreateCommit, through this store and a reopened one; it still does after
// the response is deleted while its run goes on with a continuation, and
// store.Check finds nothing wrong. A store may keep such a part by
// reference to the request (issue 14 #6); these cases hold it to the part.
func testRequestParts(t *testing.T, h Harness) {
	t.Parallel()
	// The client's JSON leaves <, > and & as they are; the engine's
	// escapes them, as encoding/json does.
	text := strings.Repeat(`Say "<b>&</b>" to é, then a new line`+"\n", 1500)
	var req bytes.Buffer
	enc := json.NewEncoder(&req)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(map[string]string{"model": "test-model", "input": text}); err != nil {
		t.Fatal(err)
	}
	header := append(append([]byte(`{"queue":[{"to":"start","msg":`), jsonstr.Append(nil, text)...), `}]}`...)
	parts := func() []store.Part {
		return []store.Part{{Name: "header", Data: header}, {Name: "state", Data: []byte("s")}}
	}
	requireParts := func(ctx context.Context, t *testing.T, s store.Store, runID string, what string) {
		t.Helper()
		cp, err := s.CheckpointGet(ctx, runID, 0)
		if err != nil {
			t.Fatalf("%s: CheckpointGet(0): %v", what, err)
		}
		want := parts()
		if len(cp.Parts) != len(want) {
			t.Fatalf("%s: %d parts, want %d", what, len(cp.Parts), len(want))
		}
		for i := range want {
			if cp.Parts[i].Name != want[i].Name || !bytes.Equal(cp.Parts[i].Data, want[i].Data) {
				t.Fatalf("%s: part %q of %d bytes, want %q of %d", what, cp.Parts[i].Name, len(cp.Parts[i].Data), want[i].Name, len(want[i].Data))
			}
		}
	}
	for _, c := range []struct {
		name         string
		fused, prune bool
	}{{"ResponseCreate", false, false}, {"CreateCommit", true, false}, {"ResponseCreate/Prune", false, true}} {
		fused := c.fused
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			b := h.setup(t)
			ctx, s := b.ctx, b.s
			var then time.Time // the first response's times: an hour ago for a prune
			if c.prune {
				if _, ok := s.(store.ResponsePruner); !ok {
					t.Skip("the store is not a store.ResponsePruner")
				}
				then = testNow().Add(-time.Hour)
			}
			p := ResponseParams(&ResponseOpts{Checkpoint: parts(), Now: then})
			p.Response.Request = req.Bytes()
			runID := p.RunID
			if fused {
				cc, ok := s.(store.CreateCommitter)
				if !ok {
					t.Skip("the store is not a store.CreateCommitter")
				}
				_, _, err := cc.CreateCommit(ctx, p, &store.CommitParams{RunID: runID, Epoch: store.NewRunEpoch, Step: 1,
					ResponseID: p.Response.ID, Status: store.StatusCompleted, Checkpoint: []store.Part{{Name: "state", Data: []byte("done")}},
					Events: []store.EventInput{{Seq: 1, Type: "response.completed", Payload: payload("response.completed", 1)}}})
				if err != nil {
					t.Fatal(err)
				}
			} else {
				if _, err := s.ResponseCreate(ctx, p); err != nil {
					t.Fatal(err)
				}
				Commit(ctx, t, s, runID, &CommitOpts{Status: store.StatusCompleted, Now: then})
			}
			requireParts(ctx, t, s, runID, "after the create")
			h.reopen(t, b)
			s = b.s
			requireParts(ctx, t, s, runID, "reopened")

			// A continuation, then the first response deleted: the run
			// and its first checkpoint stay.
			CreateResponse(ctx, t, s, &ResponseOpts{RunID: runID, PreviousResponseID: p.Response.ID})
			Commit(ctx, t, s, runID, &CommitOpts{Status: store.StatusCompleted})
			if c.prune {
				n, err := s.(store.ResponsePruner).ResponsePrune(ctx, &store.ResponsePruneParams{Before: then.Add(time.Minute)})
				if err != nil || n != 1 {
					t.Fatalf("ResponsePrune: %d pruned (%v), want the first response", n, err)
				}
			} else if err := s.ResponseDelete(ctx, p.Response.ID); err != nil {
				t.Fatal(err)
			}
			if _, err := s.ResponseGet(ctx, p.Response.ID); !errors.Is(err, store.ErrNotFound) {
				t.Fatalf("the first response after its deletion: %v, want store.ErrNotFound", err)
			}
			requireParts(ctx, t, s, runID, "the first response deleted")
			h.reopen(t, b)
			requireParts(ctx, t, b.s, runID, "the first response deleted, reopened")
		})
	}
}

// RequestPartRun creates a run whose first response's request holds a long
// input and whose step-0 checkpoint queues it (part "header", returned),
// as a store may keep by reference to the request; it finishes that
// response and continues the run with a second one, so that deleting the
// first leaves the run. It returns the run's and the first response's ids.
func RequestPartRun(ctx context.Context, t testing.TB, s store.Store) (runID, firstID string, part []byte) {
	t.Helper()
	text := strings.Repeat("words <and> more ", 2000)
	first := ResponseParams(nil)
	first.Response.Request = fmt.Appendf(nil, `{"model":"test-model","input":"%s"}`, text)
	part = fmt.Appendf(nil, `{"queue":[{"msg":%s}]}`, jsonstr.Append(nil, text))
	first.Checkpoint = []store.Part{{Name: "header", Data: part}}
	if _, err := s.ResponseCreate(ctx, first); err != nil {
		t.Fatalf("ResponseCreate: %v", err)
	}
	Commit(ctx, t, s, first.RunID, &CommitOpts{Status: store.StatusCompleted})
	CreateResponse(ctx, t, s, &ResponseOpts{RunID: first.RunID, PreviousResponseID: first.Response.ID})
	return first.RunID, first.Response.ID, part
}
