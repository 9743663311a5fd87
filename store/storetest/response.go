package storetest

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/superstep/superstep/store"
)

func testResponse(t *testing.T, h Harness) {
	t.Parallel()

	t.Run("CreateNewRun", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t)
		now := testNow().Truncate(time.Microsecond)
		p := ResponseParams(&ResponseOpts{Owner: "key-1", Now: now})
		res, err := b.s.ResponseCreate(b.ctx, p)
		requireNoError(t, err, "ResponseCreate")
		st := ReadRunState(b.ctx, t, b.s, p.RunID)
		run, resp := st.Run, st.Responses[0]
		if run.HeadResponseID != p.Response.ID || run.LastStep != 0 || !run.Active || run.Lease.Owner != LeaseOwnerDefault ||
			run.Lease.Epoch != 1 || !run.Lease.ExpiresAt.Equal(now.Add(LeaseDurationDefault)) || run.Model != "test-model" {
			t.Fatalf("run = %+v", run)
		}
		if resp.NextSeq != 1 || resp.CommitStep != 0 || resp.Owner != "key-1" || resp.RunID != p.RunID || resp.CancelRequested ||
			!bytes.Equal(resp.Request, p.Response.Request) || !bytes.Equal(resp.Snapshot, p.Response.Snapshot) || !resp.CreatedAt.Equal(now) {
			t.Fatalf("response = %+v", resp)
		}
		if res.Response.NextSeq != 1 || res.Run.Lease.Epoch != 1 || res.Run.HeadResponseID != p.Response.ID {
			t.Fatalf("result = %+v / %+v", res.Response, res.Run)
		}
		evs := st.Events[resp.ID]
		if len(evs) != 1 || evs[0].Type != "response.created" || evs[0].Step != 0 || !bytes.Equal(evs[0].Payload, p.Events[0].Payload) {
			t.Fatalf("events = %+v", evs)
		}
		if len(st.Checkpoints) != 1 || st.Checkpoints[0].Step != 0 || st.Checkpoints[0].ParentStep != -1 {
			t.Fatalf("checkpoints = %+v", st.Checkpoints)
		}
		requireParts(t, st.Last.Parts, p.Checkpoint)
	})

	t.Run("CreateRejectsDuplicateID", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t)
		c := CreateResponse(b.ctx, t, b.s, nil)
		before := ReadRunState(b.ctx, t, b.s, c.Run.ID)
		_, err := b.s.ResponseCreate(b.ctx, ResponseParams(&ResponseOpts{ID: c.Response.ID}))
		requireIs(t, err, store.ErrConflict, "ResponseCreate with an existing ID (new run)")
		_, err = b.s.ResponseCreate(b.ctx, ResponseParams(&ResponseOpts{ID: c.Response.ID, RunID: c.Run.ID}))
		requireIs(t, err, store.ErrConflict, "ResponseCreate with an existing ID (same run)")
		requireSameState(t, ReadRunState(b.ctx, t, b.s, c.Run.ID), before, "rejected creates")
	})

	t.Run("CreateWithoutCheckpointOrLease", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t)
		c := CreateResponse(b.ctx, t, b.s, &ResponseOpts{NoCheckpoint: true, NoLease: true})
		cps, err := b.s.CheckpointList(b.ctx, c.Run.ID)
		requireNoError(t, err, "CheckpointList")
		if len(cps) != 0 || c.Run.Lease.Owner != "" {
			t.Fatalf("checkpoints %+v, lease %+v", cps, c.Run.Lease)
		}
		_, err = b.s.CheckpointGetLast(b.ctx, c.Run.ID)
		requireIs(t, err, store.ErrNotFound, "CheckpointGetLast of a run without checkpoints")
	})

	t.Run("ContinuationNamesHeadOfInactiveRun", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t)
		c := CreateResponse(b.ctx, t, b.s, nil)
		Commit(b.ctx, t, b.s, c.Run.ID, nil)
		cont := ResponseParams(&ResponseOpts{RunID: c.Run.ID, PreviousResponseID: c.Response.ID})
		_, err := b.s.ResponseCreate(b.ctx, cont)
		requireIs(t, err, store.ErrConflict, "continuing an active run")
		Commit(b.ctx, t, b.s, c.Run.ID, &CommitOpts{Status: store.StatusCompleted})
		res, err := b.s.ResponseCreate(b.ctx, cont)
		requireNoError(t, err, "continuing the completed head")
		if res.Run.HeadResponseID != cont.Response.ID || !res.Run.Active || res.Run.LastStep != 2 || res.Run.Lease.Epoch != 2 ||
			res.Response.CommitStep != 2 || res.Response.StartStep != 2 || res.Response.NextSeq != 1 {
			t.Fatalf("after continuing: run %+v, response %+v", res.Run, res.Response)
		}
		if c.Response.StartStep != 0 {
			t.Fatalf("first response StartStep = %d, want 0", c.Response.StartStep)
		}
		cps, err := b.s.CheckpointList(b.ctx, c.Run.ID)
		requireNoError(t, err, "CheckpointList")
		if len(cps) != 3 {
			t.Fatalf("continuation wrote a checkpoint: %+v", cps)
		}
		Commit(b.ctx, t, b.s, c.Run.ID, &CommitOpts{Status: store.StatusCompleted})
		got, err := b.s.ResponseGet(b.ctx, cont.Response.ID)
		requireNoError(t, err, "ResponseGet")
		if got.StartStep != 2 || got.CommitStep != 3 {
			t.Fatalf("after its commit: StartStep %d CommitStep %d, want 2 and 3", got.StartStep, got.CommitStep)
		}
		stale := ResponseParams(&ResponseOpts{RunID: c.Run.ID, PreviousResponseID: c.Response.ID})
		_, err = b.s.ResponseCreate(b.ctx, stale)
		requireIs(t, err, store.ErrConflict, "continuing from a response that is no longer the head")
		resps, err := b.s.ResponseListByRun(b.ctx, c.Run.ID)
		requireNoError(t, err, "ResponseListByRun")
		if len(resps) != 2 || resps[0].ID != c.Response.ID || resps[1].ID != cont.Response.ID || resps[1].PreviousResponseID != c.Response.ID {
			t.Fatalf("responses = %+v", resps)
		}
	})

	t.Run("GetUnknown", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t)
		_, err := b.s.ResponseGet(b.ctx, "resp_missing")
		requireIs(t, err, store.ErrNotFound, "ResponseGet")
	})

	t.Run("CancelIsIdempotent", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t)
		c := CreateResponse(b.ctx, t, b.s, nil)
		for range 2 {
			resp, err := b.s.ResponseCancel(b.ctx, c.Response.ID)
			requireNoError(t, err, "ResponseCancel")
			if !resp.CancelRequested || resp.Status != store.StatusCancelled || resp.CompletedAt != nil || resp.Finished() {
				t.Fatalf("after cancel: %+v", resp)
			}
		}
		_, err := b.s.ResponseCancel(b.ctx, "resp_missing")
		requireIs(t, err, store.ErrNotFound, "ResponseCancel of an unknown response")
		Commit(b.ctx, t, b.s, c.Run.ID, &CommitOpts{Status: store.StatusCancelled})
	})

	// Once a cancel is recorded the store decides: the response reads as
	// cancelled, and its owner can only finish it as cancelled.
	t.Run("CancelRefusesOtherCommits", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t)
		c := CreateResponse(b.ctx, t, b.s, nil)
		Commit(b.ctx, t, b.s, c.Run.ID, nil)
		resp, err := b.s.ResponseCancel(b.ctx, c.Response.ID)
		requireNoError(t, err, "ResponseCancel")
		if resp.Status != store.StatusCancelled || !resp.CancelRequested {
			t.Fatalf("cancel reply: %+v", resp)
		}
		got, err := b.s.ResponseGet(b.ctx, c.Response.ID)
		requireNoError(t, err, "ResponseGet")
		if got.Status != store.StatusCancelled || got.Finished() {
			t.Fatalf("read after cancel: status %s finished %v", got.Status, got.Finished())
		}
		requireNoError(t, store.Check(b.ctx, b.s), "Check with a cancel still to commit")
		for _, st := range []store.Status{store.StatusInProgress, store.StatusCompleted, store.StatusFailed} {
			_, err := b.s.Commit(b.ctx, NextCommit(b.ctx, t, b.s, c.Run.ID, &CommitOpts{Status: st}))
			requireIs(t, err, store.ErrCancelled, "a "+string(st)+" commit after the cancel")
		}
		err = b.s.EventAppend(b.ctx, appendParams(c, got.NextSeq, 1))
		requireIs(t, err, store.ErrCancelled, "EventAppend after the cancel")
		Commit(b.ctx, t, b.s, c.Run.ID, &CommitOpts{Status: store.StatusCancelled})
		final, err := b.s.ResponseGet(b.ctx, c.Response.ID)
		requireNoError(t, err, "ResponseGet")
		run, err := b.s.RunGet(b.ctx, c.Run.ID)
		requireNoError(t, err, "RunGet")
		if final.Status != store.StatusCancelled || !final.Finished() || run.Active || run.LastStep != 2 {
			t.Fatalf("after the cancelled commit: response %s finished %v, run active %v step %d",
				final.Status, final.Finished(), run.Active, run.LastStep)
		}
	})

	// A response that finished before the cancel stays as it was.
	t.Run("CancelAfterTerminalChangesNothing", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t)
		c := CreateResponse(b.ctx, t, b.s, nil)
		Commit(b.ctx, t, b.s, c.Run.ID, &CommitOpts{Status: store.StatusCompleted})
		resp, err := b.s.ResponseCancel(b.ctx, c.Response.ID)
		requireNoError(t, err, "ResponseCancel")
		if resp.Status != store.StatusCompleted || resp.CancelRequested || !resp.Finished() {
			t.Fatalf("cancel of a completed response: %+v", resp)
		}
	})

	// A write of a deleted response is ErrNotFound, so its owner stops
	// quietly, also when the run lives on with other responses.
	t.Run("CommitOfDeletedResponseIsNotFound", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t)
		c := CreateResponse(b.ctx, t, b.s, nil)
		Commit(b.ctx, t, b.s, c.Run.ID, &CommitOpts{Status: store.StatusCompleted})
		cont := CreateResponse(b.ctx, t, b.s, &ResponseOpts{RunID: c.Run.ID, PreviousResponseID: c.Response.ID})
		_, err := b.s.ResponseCancel(b.ctx, cont.Response.ID)
		requireNoError(t, err, "ResponseCancel")
		requireNoError(t, b.s.ResponseDelete(b.ctx, cont.Response.ID), "ResponseDelete")
		p := NextCommit(b.ctx, t, b.s, c.Run.ID, &CommitOpts{Status: store.StatusCancelled, ResponseID: cont.Response.ID, Seq: cont.Response.NextSeq})
		p.Epoch = cont.Run.Lease.Epoch
		_, err = b.s.Commit(b.ctx, p)
		requireIs(t, err, store.ErrNotFound, "the cancelled commit of a deleted response")
	})

	t.Run("DeleteLastResponseDeletesRun", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t)
		c := CreateResponse(b.ctx, t, b.s, nil)
		Commit(b.ctx, t, b.s, c.Run.ID, nil)
		requireNoError(t, b.s.ResponseDelete(b.ctx, c.Response.ID), "ResponseDelete")
		_, err := b.s.ResponseGet(b.ctx, c.Response.ID)
		requireIs(t, err, store.ErrNotFound, "ResponseGet after delete")
		_, err = b.s.EventList(b.ctx, &store.EventListParams{ResponseID: c.Response.ID, After: -1})
		requireIs(t, err, store.ErrNotFound, "EventList after delete")
		_, err = b.s.RunGet(b.ctx, c.Run.ID)
		requireIs(t, err, store.ErrNotFound, "RunGet after its last response was deleted")
		_, err = b.s.CheckpointGet(b.ctx, c.Run.ID, 1)
		requireIs(t, err, store.ErrNotFound, "CheckpointGet after the run was deleted")
		requireIs(t, b.s.ResponseDelete(b.ctx, c.Response.ID), store.ErrNotFound, "second ResponseDelete")
	})

	t.Run("DeleteOneOfTwoKeepsRun", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t)
		c := CreateResponse(b.ctx, t, b.s, nil)
		Commit(b.ctx, t, b.s, c.Run.ID, &CommitOpts{Status: store.StatusCompleted})
		cont := CreateResponse(b.ctx, t, b.s, &ResponseOpts{RunID: c.Run.ID, PreviousResponseID: c.Response.ID})
		requireNoError(t, b.s.ResponseDelete(b.ctx, c.Response.ID), "ResponseDelete of the first")
		st := ReadRunState(b.ctx, t, b.s, c.Run.ID)
		if st.Run == nil || len(st.Responses) != 1 || st.Responses[0].ID != cont.Response.ID || !st.Run.Active {
			t.Fatalf("after deleting the first response: %s", st)
		}
		Commit(b.ctx, t, b.s, c.Run.ID, nil)
	})

	t.Run("DeleteHeadMovesHeadBack", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t)
		c := CreateResponse(b.ctx, t, b.s, nil)
		Commit(b.ctx, t, b.s, c.Run.ID, &CommitOpts{Status: store.StatusCompleted})
		cont := CreateResponse(b.ctx, t, b.s, &ResponseOpts{RunID: c.Run.ID, PreviousResponseID: c.Response.ID, NoLease: true})
		requireNoError(t, b.s.ResponseDelete(b.ctx, cont.Response.ID), "ResponseDelete of the active head")
		st := ReadRunState(b.ctx, t, b.s, c.Run.ID)
		if st.Run == nil || st.Run.Active || st.Run.HeadResponseID != c.Response.ID || len(st.Responses) != 1 {
			t.Fatalf("after deleting the active head: %s, want the run inactive, headed by the first response", st)
		}
		claimed, err := b.s.LeaseClaim(b.ctx, &store.LeaseClaimParams{Owner: "host-b", Duration: time.Minute})
		requireNoError(t, err, "LeaseClaim")
		if len(claimed) != 0 {
			t.Fatalf("claimed %d runs; a run whose head was deleted has nothing to drive", len(claimed))
		}
		_, err = b.s.ResponseCreate(b.ctx, ResponseParams(&ResponseOpts{RunID: c.Run.ID, PreviousResponseID: cont.Response.ID}))
		requireIs(t, err, store.ErrConflict, "continuing from the deleted response")
		CreateResponse(b.ctx, t, b.s, &ResponseOpts{RunID: c.Run.ID, PreviousResponseID: c.Response.ID})
	})

	t.Run("ContinuationOfDeletedRunCreatesNothing", func(t *testing.T) {
		// A follow-up racing with a DELETE (or retention) of the run's only
		// response: the continuation must not bring the run back at step 0.
		t.Parallel()
		b := h.setup(t)
		c := CreateResponse(b.ctx, t, b.s, nil)
		Commit(b.ctx, t, b.s, c.Run.ID, &CommitOpts{Status: store.StatusCompleted})
		requireNoError(t, b.s.ResponseDelete(b.ctx, c.Response.ID), "ResponseDelete")
		cont := ResponseParams(&ResponseOpts{RunID: c.Run.ID, PreviousResponseID: c.Response.ID})
		_, err := b.s.ResponseCreate(b.ctx, cont)
		requireContinueError(t, err, store.ContinueGone, "continuing from the deleted only response")
		if st := ReadRunState(b.ctx, t, b.s, c.Run.ID); st.Run != nil {
			t.Fatalf("refused continuation left a run: %s", st)
		}
		_, err = b.s.ResponseGet(b.ctx, cont.Response.ID)
		requireIs(t, err, store.ErrNotFound, "ResponseGet of the refused continuation")
	})

	t.Run("ContinuationOnlyFromLastCommit", func(t *testing.T) {
		// Deleting the head moves the head back, but the run's last step and
		// checkpoint are the deleted response's: continuing the previous
		// response would resume from the deleted one's state.
		t.Parallel()
		b := h.setup(t)
		c := CreateResponse(b.ctx, t, b.s, nil)
		Commit(b.ctx, t, b.s, c.Run.ID, &CommitOpts{Status: store.StatusCompleted})
		second := CreateResponse(b.ctx, t, b.s, &ResponseOpts{RunID: c.Run.ID, PreviousResponseID: c.Response.ID})
		Commit(b.ctx, t, b.s, c.Run.ID, &CommitOpts{Status: store.StatusFailed})
		requireNoError(t, b.s.ResponseDelete(b.ctx, second.Response.ID), "ResponseDelete of the head")
		before := ReadRunState(b.ctx, t, b.s, c.Run.ID)
		if before.Run.HeadResponseID != c.Response.ID || before.Run.LastStep != 2 {
			t.Fatalf("after deleting the head: %s, want head %s at step 2", before, c.Response.ID)
		}
		cont := ResponseParams(&ResponseOpts{RunID: c.Run.ID, PreviousResponseID: c.Response.ID})
		_, err := b.s.ResponseCreate(b.ctx, cont)
		requireContinueError(t, err, store.ContinueNotLastCommit, "continuing a head whose commit is not the run's last")
		requireSameState(t, ReadRunState(b.ctx, t, b.s, c.Run.ID), before, "refused continuation")
		_, err = b.s.ResponseGet(b.ctx, cont.Response.ID)
		requireIs(t, err, store.ErrNotFound, "ResponseGet of the refused continuation")
		_, err = b.s.ResponseCreate(b.ctx, ResponseParams(&ResponseOpts{RunID: c.Run.ID, PreviousResponseID: second.Response.ID}))
		requireContinueError(t, err, store.ContinueGone, "continuing the deleted head")
	})

	t.Run("ContinuationRefusalSaysWhy", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t)
		c := CreateResponse(b.ctx, t, b.s, nil)
		_, err := b.s.ResponseCreate(b.ctx, ResponseParams(&ResponseOpts{RunID: c.Run.ID, PreviousResponseID: c.Response.ID}))
		requireContinueError(t, err, store.ContinueActive, "continuing a response in progress")
		Commit(b.ctx, t, b.s, c.Run.ID, &CommitOpts{Status: store.StatusCompleted})
		_, err = b.s.ResponseCreate(b.ctx, ResponseParams(&ResponseOpts{RunID: c.Run.ID, PreviousResponseID: "resp_missing"}))
		requireContinueError(t, err, store.ContinueGone, "continuing from a response the run does not have")
		_, err = b.s.ResponseCreate(b.ctx, ResponseParams(&ResponseOpts{RunID: "run_missing", PreviousResponseID: c.Response.ID}))
		requireContinueError(t, err, store.ContinueGone, "continuing a run that does not exist")
		CreateResponse(b.ctx, t, b.s, &ResponseOpts{RunID: c.Run.ID, PreviousResponseID: c.Response.ID})
	})

	// A commit with a nil Snapshot keeps the response's snapshot while
	// the rest of the commit applies (status, log, step); the next commit
	// with one replaces it.
	t.Run("CommitNilSnapshotKeepsIt", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t)
		c := CreateResponse(b.ctx, t, b.s, nil)
		Commit(b.ctx, t, b.s, c.Run.ID, nil)
		before, err := b.s.ResponseGet(b.ctx, c.Response.ID)
		requireNoError(t, err, "ResponseGet")
		p := NextCommit(b.ctx, t, b.s, c.Run.ID, &CommitOpts{NoEvents: true})
		p.Snapshot = nil
		_, err = b.s.Commit(b.ctx, p)
		requireNoError(t, err, "Commit with a nil snapshot")
		kept, err := b.s.ResponseGet(b.ctx, c.Response.ID)
		requireNoError(t, err, "ResponseGet")
		if string(kept.Snapshot) != string(before.Snapshot) || kept.CommitStep != p.Step || kept.NextSeq != before.NextSeq {
			t.Fatalf("after a nil-snapshot commit: snapshot %s (was %s), commit step %d (want %d)", kept.Snapshot, before.Snapshot,
				kept.CommitStep, p.Step)
		}
		p = NextCommit(b.ctx, t, b.s, c.Run.ID, &CommitOpts{Status: store.StatusCompleted})
		_, err = b.s.Commit(b.ctx, p)
		requireNoError(t, err, "Commit")
		done, err := b.s.ResponseGet(b.ctx, c.Response.ID)
		requireNoError(t, err, "ResponseGet")
		if string(done.Snapshot) != string(p.Snapshot) || string(done.Snapshot) == string(before.Snapshot) {
			t.Fatalf("a commit with a snapshot did not replace it: %s", done.Snapshot)
		}
		requireNoError(t, store.Check(b.ctx, b.s), "Check")
	})

	// A commit that changes nothing the response shows (no events, nil
	// snapshot, same status) still moves its CommitStep and UpdatedAt,
	// whatever wrote the response before it (a commit, a live append) or
	// after it (a cancel keeps them as the cancel's); a branch of it
	// starts at that step. (A store may leave the response's row alone
	// then and derive both from the run: migration 016 of PostgreSQL.)
	t.Run("SilentCommitMovesCommitStep", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t)
		c := CreateResponse(b.ctx, t, b.s, nil)
		t0 := testNow()
		at := func(i int) time.Time { return t0.Add(time.Duration(i) * time.Second) }
		silent := func(i int) *store.CommitParams {
			t.Helper()
			p := NextCommit(b.ctx, t, b.s, c.Run.ID, &CommitOpts{NoEvents: true, Now: at(i)})
			p.Snapshot = nil
			_, err := b.s.Commit(b.ctx, p)
			requireNoError(t, err, "silent Commit")
			return p
		}
		want := func(step int64, updated time.Time, nextSeq int64, what string) {
			t.Helper()
			r, err := b.s.ResponseGet(b.ctx, c.Response.ID)
			requireNoError(t, err, "ResponseGet")
			if r.CommitStep != step || !r.UpdatedAt.Equal(updated) || r.NextSeq != nextSeq {
				t.Fatalf("%s: CommitStep %d UpdatedAt %v NextSeq %d, want %d %v %d", what, r.CommitStep, r.UpdatedAt, r.NextSeq,
					step, updated, nextSeq)
			}
			rs, err := b.s.ResponseListByRun(b.ctx, c.Run.ID)
			requireNoError(t, err, "ResponseListByRun")
			if rs[0].CommitStep != step || !rs[0].UpdatedAt.Equal(updated) {
				t.Fatalf("%s: listed CommitStep %d UpdatedAt %v, want %d %v", what, rs[0].CommitStep, rs[0].UpdatedAt, step, updated)
			}
		}
		Commit(b.ctx, t, b.s, c.Run.ID, &CommitOpts{Now: at(1)})
		want(1, at(1), c.Response.NextSeq+2, "after a commit with events")
		silent(2)
		want(2, at(2), c.Response.NextSeq+2, "after a silent commit")
		silent(3)
		want(3, at(3), c.Response.NextSeq+2, "after two silent commits")
		seq := c.Response.NextSeq + 2
		err := b.s.EventAppend(b.ctx, &store.EventAppendParams{RunID: c.Run.ID, Epoch: c.Run.Lease.Epoch, ResponseID: c.Response.ID,
			Now: at(4), Events: []store.EventInput{{Seq: seq, Type: "response.output_text.delta", Payload: payload("delta", seq)}}})
		requireNoError(t, err, "EventAppend")
		want(3, at(4), seq+1, "after a live append")
		silent(5)
		want(4, at(5), seq+1, "after a silent commit following a live append")
		br := CreateResponse(b.ctx, t, b.s, &ResponseOpts{PreviousResponseID: c.Response.ID, Branch: true})
		if br.Run.LastStep != 4 || br.Response.StartStep != 4 {
			t.Fatalf("branch of a response whose last commit was silent: run at step %d, start step %d; want 4", br.Run.LastStep,
				br.Response.StartStep)
		}
		silent(6)
		cancelled, err := b.s.ResponseCancel(b.ctx, c.Response.ID)
		requireNoError(t, err, "ResponseCancel")
		if cancelled.CommitStep != 5 {
			t.Fatalf("ResponseCancel after a silent commit: CommitStep %d, want 5", cancelled.CommitStep)
		}
		want(5, cancelled.UpdatedAt, seq+1, "after a cancel")
		p := NextCommit(b.ctx, t, b.s, c.Run.ID, &CommitOpts{Status: store.StatusCancelled, Now: at(7)})
		_, err = b.s.Commit(b.ctx, p)
		requireNoError(t, err, "cancelled Commit")
		want(6, at(7), seq+3, "after the cancelled commit")
		requireNoError(t, store.Check(b.ctx, b.s), "Check")
	})

	// A branch is a new run continuing a previous response (not its
	// run's head, or a head whose run is busy) from a checkpoint the caller
	// copied: the new run starts at step 0 with it, the previous response
	// and its run are untouched; a branch of a deleted response, or under
	// an existing run's id, creates nothing.
	t.Run("Branch", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t)
		c := CreateResponse(b.ctx, t, b.s, nil)
		Commit(b.ctx, t, b.s, c.Run.ID, &CommitOpts{Status: store.StatusCompleted})
		second := CreateResponse(b.ctx, t, b.s, &ResponseOpts{RunID: c.Run.ID, PreviousResponseID: c.Response.ID})
		before := ReadRunState(b.ctx, t, b.s, c.Run.ID)
		parts := []store.Part{{Name: "state", Data: []byte("copied from step 1")}}
		br := CreateResponse(b.ctx, t, b.s, &ResponseOpts{PreviousResponseID: c.Response.ID, Branch: true, Checkpoint: parts})
		// The branch starts at the step the previous response's commit
		// left (1): its state's numbering goes on from there.
		if br.Run.ID == c.Run.ID || br.Run.HeadResponseID != br.Response.ID || br.Run.LastStep != 1 ||
			br.Response.PreviousResponseID != c.Response.ID || br.Response.StartStep != 1 || br.Response.CommitStep != 1 {
			t.Fatalf("branch: run %+v response %+v", br.Run, br.Response)
		}
		cp, err := b.s.CheckpointGetLast(b.ctx, br.Run.ID)
		requireNoError(t, err, "CheckpointGetLast of the branch")
		if cp.Step != 1 || len(cp.Parts) != 1 || string(cp.Parts[0].Data) != "copied from step 1" {
			t.Fatalf("branch checkpoint %+v", cp)
		}
		if got := ReadRunState(b.ctx, t, b.s, br.Run.ID); got.Run == nil || got.Run.LastStep != 1 {
			t.Fatalf("branch run as read back: %s", got)
		}
		Commit(b.ctx, t, b.s, br.Run.ID, &CommitOpts{Status: store.StatusCompleted}) // step 2 follows
		requireSameState(t, ReadRunState(b.ctx, t, b.s, c.Run.ID), before, "the branched-from run")
		_, err = b.s.ResponseCreate(b.ctx, ResponseParams(&ResponseOpts{RunID: c.Run.ID, PreviousResponseID: c.Response.ID, Branch: true}))
		requireIs(t, err, store.ErrConflict, "a branch under an existing run id")
		Commit(b.ctx, t, b.s, c.Run.ID, &CommitOpts{Status: store.StatusCompleted})
		requireNoError(t, b.s.ResponseDelete(b.ctx, second.Response.ID), "ResponseDelete")
		gone := ResponseParams(&ResponseOpts{PreviousResponseID: second.Response.ID, Branch: true})
		_, err = b.s.ResponseCreate(b.ctx, gone)
		requireContinueError(t, err, store.ContinueGone, "a branch of a deleted response")
		if st := ReadRunState(b.ctx, t, b.s, gone.RunID); st.Run != nil {
			t.Fatalf("a refused branch left a run: %s", st)
		}
		requireNoError(t, store.Check(b.ctx, b.s), "Check")
	})

	// Publication and Input are written by ResponseCreate and never
	// changed: commits, live appends, a cancel, checkpoint retention and
	// the terminal commit keep them; a response created without them
	// reads "" and nil, and an empty Input stays empty (not nil).
	t.Run("CreateFactsKeptAsWritten", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t)
		const input = `[{"type":"message","role":"user","content":[{"type":"input_text","text":"héllo"}]}]`
		p := ResponseParams(nil)
		p.Response.Publication, p.Response.Input = "live", []byte(input)
		c, err := b.s.ResponseCreate(b.ctx, p)
		requireNoError(t, err, "ResponseCreate")
		requireCreateFacts(t, c.Response, "live", []byte(input), "the create's result")
		p.Response.Input[0] = 'X' // the store kept its own copy, or read it back
		check := func(id, pub string, input []byte, what string) {
			t.Helper()
			got, err := b.s.ResponseGet(b.ctx, id)
			requireNoError(t, err, "ResponseGet "+what)
			requireCreateFacts(t, got, pub, input, "ResponseGet "+what)
			resps, err := b.s.ResponseListByRun(b.ctx, got.RunID)
			requireNoError(t, err, "ResponseListByRun "+what)
			for _, r := range resps {
				if r.ID == id {
					requireCreateFacts(t, r, pub, input, "ResponseListByRun "+what)
					return
				}
			}
			t.Fatalf("ResponseListByRun %s: %s not listed", what, id)
		}
		check(c.Response.ID, "live", []byte(input), "after create")

		cp := NextCommit(b.ctx, t, b.s, c.Run.ID, nil)
		cp.PruneKeep = 1
		_, err = b.s.Commit(b.ctx, cp)
		requireNoError(t, err, "Commit")
		check(c.Response.ID, "live", []byte(input), "after a commit (pruning checkpoints)")
		got, err := b.s.ResponseGet(b.ctx, c.Response.ID)
		requireNoError(t, err, "ResponseGet")
		requireNoError(t, b.s.EventAppend(b.ctx, appendParams(c, got.NextSeq, 2)), "EventAppend")
		check(c.Response.ID, "live", []byte(input), "after an EventAppend")
		Commit(b.ctx, t, b.s, c.Run.ID, nil)
		_, err = b.s.CheckpointPrune(b.ctx, &store.CheckpointPruneParams{RunID: c.Run.ID, KeepLast: 1})
		requireNoError(t, err, "CheckpointPrune")
		check(c.Response.ID, "live", []byte(input), "after CheckpointPrune")
		cancelled, err := b.s.ResponseCancel(b.ctx, c.Response.ID)
		requireNoError(t, err, "ResponseCancel")
		requireCreateFacts(t, cancelled, "live", []byte(input), "ResponseCancel's result")
		check(c.Response.ID, "live", []byte(input), "after ResponseCancel")
		Commit(b.ctx, t, b.s, c.Run.ID, &CommitOpts{Status: store.StatusCancelled})
		check(c.Response.ID, "live", []byte(input), "after the terminal commit")
		again, err := b.s.ResponseCancel(b.ctx, c.Response.ID)
		requireNoError(t, err, "ResponseCancel of the finished response")
		requireCreateFacts(t, again, "live", []byte(input), "ResponseCancel's result once finished")

		// A continuation created without them; the first keeps its own.
		cont := CreateResponse(b.ctx, t, b.s, &ResponseOpts{RunID: c.Run.ID, PreviousResponseID: c.Response.ID})
		requireCreateFacts(t, cont.Response, "", nil, "the continuation's create result")
		check(cont.Response.ID, "", nil, "of a response created without them")
		check(c.Response.ID, "live", []byte(input), "of the first response after a continuation")
		Commit(b.ctx, t, b.s, c.Run.ID, &CommitOpts{Status: store.StatusCompleted})
		check(cont.Response.ID, "", nil, "of a response created without them, after its terminal commit")

		// An empty Input is not an absent one.
		p = ResponseParams(&ResponseOpts{RunID: c.Run.ID, PreviousResponseID: cont.Response.ID})
		p.Response.Publication, p.Response.Input = "committed", []byte{}
		e, err := b.s.ResponseCreate(b.ctx, p)
		requireNoError(t, err, "ResponseCreate with an empty Input")
		requireCreateFacts(t, e.Response, "committed", []byte{}, "the create's result (empty Input)")
		check(e.Response.ID, "committed", []byte{}, "of a response created with an empty Input")
		requireNoError(t, store.Check(b.ctx, b.s), "Check")
	})
}

// requireCreateFacts fails the test unless r's Publication and Input are
// pub and input, nil (absent) told apart from empty.
func requireCreateFacts(t testing.TB, r *store.Response, pub string, input []byte, what string) {
	t.Helper()
	if r.Publication != pub || !bytes.Equal(r.Input, input) || (r.Input == nil) != (input == nil) {
		t.Fatalf("%s: Publication %q Input %q (nil %v), want %q %q (nil %v)", what,
			r.Publication, r.Input, r.Input == nil, pub, input, input == nil)
	}
}

// requireContinueError fails the test unless err is a store.ContinueError
// with reason (and so matches store.ErrConflict).
func requireContinueError(t testing.TB, err error, reason store.ContinueReason, what string) {
	t.Helper()
	requireIs(t, err, store.ErrConflict, what)
	var ce *store.ContinueError
	if !errors.As(err, &ce) || ce.Reason != reason {
		t.Fatalf("%s: err = %v, want a ContinueError with reason %s", what, err, reason)
	}
}
