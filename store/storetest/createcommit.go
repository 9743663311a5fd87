package storetest

import (
	"bytes"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/superstep/superstep/store"
)

// createCommitter returns b's store as a CreateCommitter, skipping the
// test for a backend that has none (the interface is optional).
func createCommitter(t *testing.T, b *bundle) store.CreateCommitter {
	t.Helper()
	cc, ok := b.s.(store.CreateCommitter)
	if !ok {
		t.Skipf("%T does not implement store.CreateCommitter", b.s)
	}
	return cc
}

// createCommitParams returns the create of a new run (ResponseParams: the
// response.created event at seq 0, the run claimed by LeaseOwnerDefault)
// with a step-0 checkpoint of a small part the first commit changes and a
// large one it keeps, and that first commit: step 1, events seq
// 1..events, status. Its Epoch is left 0: CreateCommit ignores it.
func createCommitParams(events int, status store.Status) (*store.ResponseCreateParams, *store.CommitParams) {
	big := bytes.Repeat([]byte("unchanged "), 500)
	c := ResponseParams(&ResponseOpts{Checkpoint: []store.Part{{Name: "state", Data: []byte("step-0")}, {Name: "big", Data: big}}})
	p := &store.CommitParams{RunID: c.RunID, ResponseID: c.Response.ID, Step: 1, Status: status,
		Checkpoint: []store.Part{{Name: "state", Data: []byte("step-1")}, {Name: "big", Data: big}}}
	for i := range events {
		seq := int64(1 + i)
		p.Events = append(p.Events, store.EventInput{Seq: seq, Type: "response.output_text.delta", Payload: payload("delta", seq)})
	}
	p.Snapshot = snapshot(p.ResponseID, status, 1)
	return c, p
}

// createThenCommit writes c and p with the two calls CreateCommit stands
// for, p under the claim c made; it fails the test on error.
func createThenCommit(t *testing.T, b *bundle, c *store.ResponseCreateParams, p *store.CommitParams) (*store.ResponseCreateResult, *store.CommitResult) {
	t.Helper()
	cr, err := b.s.ResponseCreate(b.ctx, c)
	requireNoError(t, err, "ResponseCreate")
	p.Epoch = cr.Run.Lease.Epoch
	res, err := b.s.Commit(b.ctx, p)
	requireNoError(t, err, "Commit")
	return cr, res
}

// anonymous returns a copy of st without what tells two runs written
// alike apart: their ids (a response's also inside its snapshot) and
// times (only whether CompletedAt is set is kept). Events are keyed by
// the response's place in Responses.
func anonymous(st *RunState) *RunState {
	out := &RunState{Events: map[string][]store.Event{}}
	if st.Run != nil {
		out.Run = anonymousRun(st.Run)
	}
	for i, r := range st.Responses {
		out.Responses = append(out.Responses, anonymousResponse(r))
		var evs []store.Event
		for _, ev := range st.Events[r.ID] {
			ev.ResponseID = ""
			evs = append(evs, ev)
		}
		out.Events[strconv.Itoa(i)] = evs
	}
	for _, c := range st.Checkpoints {
		c.RunID, c.CreatedAt = "", time.Time{}
		out.Checkpoints = append(out.Checkpoints, c)
	}
	if st.Last != nil {
		last := *st.Last
		last.RunID, last.CreatedAt = "", time.Time{}
		out.Last = &last
	}
	return out
}

func anonymousRun(r *store.Run) *store.Run {
	c := *r
	c.ID, c.HeadResponseID, c.CreatedAt, c.UpdatedAt, c.Lease.ExpiresAt = "", "", time.Time{}, time.Time{}, time.Time{}
	return &c
}

func anonymousResponse(r *store.Response) *store.Response {
	c := *r
	c.Snapshot = bytes.ReplaceAll(r.Snapshot, []byte(r.ID), []byte("ID"))
	c.ID, c.RunID, c.CreatedAt, c.UpdatedAt = "", "", time.Time{}, time.Time{}
	if c.CompletedAt != nil {
		c.CompletedAt = &time.Time{}
	}
	return &c
}

// requireAlike fails the test unless got and want are equal.
func requireAlike(t testing.TB, got, want any, what string) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s differs from ResponseCreate then Commit's:\n got  %+v\n want %+v", what, got, want)
	}
}

// requireNothingWritten fails the test unless the run and the response c
// would create are both unknown.
func requireNothingWritten(t testing.TB, b *bundle, c *store.ResponseCreateParams, what string) {
	t.Helper()
	_, err := b.s.ResponseGet(b.ctx, c.Response.ID)
	requireIs(t, err, store.ErrNotFound, what+": ResponseGet")
	_, err = b.s.RunGet(b.ctx, c.RunID)
	requireIs(t, err, store.ErrNotFound, what+": RunGet")
	if st := ReadRunState(b.ctx, t, b.s, c.RunID); st.Run != nil {
		t.Fatalf("%s: left %s", what, st)
	}
}

func testCreateCommit(t *testing.T, h Harness) {
	t.Parallel()

	// CreateCommit writes what ResponseCreate then Commit write, and
	// returns what they return: compared field by field with the same
	// create and commit written by the two calls, ids and times aside.
	// The commit is made under the create's claim whatever its Epoch.
	t.Run("WritesAsCreateThenCommit", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t)
		cc := createCommitter(t, b)
		c, p := createCommitParams(3, store.StatusInProgress)
		p.Epoch = 42 // ignored
		cr, res, err := cc.CreateCommit(b.ctx, c, p)
		requireNoError(t, err, "CreateCommit")
		c2, p2 := createCommitParams(3, store.StatusInProgress)
		cr2, res2 := createThenCommit(t, b, c2, p2)

		requireAlike(t, anonymousResponse(cr.Response), anonymousResponse(cr2.Response), "the create's Response")
		requireAlike(t, anonymousRun(cr.Run), anonymousRun(cr2.Run), "the create's Run")
		requireAlike(t, res, res2, "the CommitResult")
		if cr.Run.Lease.Owner != LeaseOwnerDefault || cr.Run.Lease.Epoch < 1 || cr.Run.LastStep != 0 || res.NextSeq != 4 {
			t.Fatalf("results: run %+v, commit %+v", cr.Run, res)
		}

		resp, err := b.s.ResponseGet(b.ctx, c.Response.ID)
		requireNoError(t, err, "ResponseGet")
		resp2, err := b.s.ResponseGet(b.ctx, c2.Response.ID)
		requireNoError(t, err, "ResponseGet")
		requireAlike(t, anonymousResponse(resp), anonymousResponse(resp2), "ResponseGet")
		if resp.NextSeq != 4 || resp.CommitStep != 1 || resp.StartStep != 0 || resp.Status != store.StatusInProgress ||
			!bytes.Equal(resp.Snapshot, p.Snapshot) {
			t.Fatalf("response = %+v", resp)
		}

		run, err := b.s.RunGet(b.ctx, c.RunID)
		requireNoError(t, err, "RunGet")
		run2, err := b.s.RunGet(b.ctx, c2.RunID)
		requireNoError(t, err, "RunGet")
		requireAlike(t, anonymousRun(run), anonymousRun(run2), "RunGet")
		if run.LastStep != 1 || !run.Active || run.HeadResponseID != c.Response.ID || run.Lease.Owner != LeaseOwnerDefault ||
			run.Lease.Epoch != cr.Run.Lease.Epoch || !run.Lease.ExpiresAt.Equal(cr.Run.Lease.ExpiresAt) {
			t.Fatalf("run = %+v, want LastStep 1, active, held by %s at epoch %d until %v", run, LeaseOwnerDefault,
				cr.Run.Lease.Epoch, cr.Run.Lease.ExpiresAt)
		}

		evs := ListAll(b.ctx, t, b.s, c.Response.ID)
		in := append(append([]store.EventInput(nil), c.Events...), p.Events...)
		if len(evs) != len(in) {
			t.Fatalf("%d events, want %d", len(evs), len(in))
		}
		for i, ev := range evs {
			step := int64(1)
			if i == 0 {
				step = 0
			}
			if ev.Seq != int64(i) || ev.Step != step || ev.Type != in[i].Type || !bytes.Equal(ev.Payload, in[i].Payload) {
				t.Fatalf("event %d = %+v, want seq %d step %d %+v", i, ev, i, step, in[i])
			}
		}

		last, err := b.s.CheckpointGetLast(b.ctx, c.RunID)
		requireNoError(t, err, "CheckpointGetLast")
		if last.Step != 1 || last.ParentStep != 0 {
			t.Fatalf("last checkpoint: step %d parent %d, want 1 and 0", last.Step, last.ParentStep)
		}
		requireParts(t, last.Parts, p.Checkpoint)
		requireAlike(t, anonymous(ReadRunState(b.ctx, t, b.s, c.RunID)), anonymous(ReadRunState(b.ctx, t, b.s, c2.RunID)),
			"the run's state")

		// The claim is the owner's to keep committing under.
		Commit(b.ctx, t, b.s, c.RunID, nil)
		st := ReadRunState(b.ctx, t, b.s, c.RunID)
		if st.Run.LastStep != 2 || st.Run.Lease.Epoch != cr.Run.Lease.Epoch || len(st.Checkpoints) != 3 {
			t.Fatalf("after the next commit: %s, checkpoints %+v", st, st.Checkpoints)
		}
	})

	// A first commit that finishes the response, as the host sends it for
	// a request done in one step (Release, PruneKeep per
	// Config.KeepCheckpoints, webhooks), leaves the run inactive and its
	// lease released, as ResponseCreate then Commit do.
	t.Run("Terminal", func(t *testing.T) {
		t.Parallel()
		for _, tc := range []struct {
			name      string
			pruneKeep int
			webhooks  int
		}{
			{name: "NoPrune"},
			{name: "PruneKeep1", pruneKeep: 1},
			{name: "PruneKeep2", pruneKeep: 2},
			{name: "Webhooks", pruneKeep: 1, webhooks: 2},
		} {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				b := h.setup(t)
				cc := createCommitter(t, b)
				params := func() (*store.ResponseCreateParams, *store.CommitParams) {
					c, p := createCommitParams(1, store.StatusCompleted)
					p.Usage, p.Release, p.PruneKeep = []byte(`{"total_tokens":3}`), true, tc.pruneKeep
					if tc.webhooks > 0 {
						p.Webhooks = webhooks("response.completed", tc.webhooks)
					}
					return c, p
				}
				c, p := params()
				cr, res, err := cc.CreateCommit(b.ctx, c, p)
				requireNoError(t, err, "CreateCommit")
				c2, p2 := params()
				_, res2 := createThenCommit(t, b, c2, p2)
				requireAlike(t, res, res2, "the CommitResult")
				st := ReadRunState(b.ctx, t, b.s, c.RunID)
				requireAlike(t, anonymous(st), anonymous(ReadRunState(b.ctx, t, b.s, c2.RunID)), "the run's state")
				resp := st.Responses[0]
				if st.Run.Active || st.Run.Lease.Owner != "" || st.Run.LastStep != 1 || resp.Status != store.StatusCompleted ||
					!resp.Finished() || resp.NextSeq != 2 || !bytes.Equal(resp.Usage, p.Usage) {
					t.Fatalf("after the terminal CreateCommit: %s, response %+v", st, resp)
				}
				if tc.pruneKeep == 1 && (res.Pruned != 1 || len(st.Checkpoints) != 1) {
					t.Fatalf("PruneKeep 1 pruned %d, left %+v; want step 0 pruned", res.Pruned, st.Checkpoints)
				}
				// Released: the claim's holder is fenced, as after LeaseRelease.
				_, err = b.s.LeaseRenew(b.ctx, &store.LeaseParams{RunID: c.RunID, Owner: LeaseOwnerDefault,
					Epoch: cr.Run.Lease.Epoch, Duration: time.Hour})
				requireIs(t, err, store.ErrFenced, "LeaseRenew after the releasing CreateCommit")
				if tc.webhooks == 0 {
					return
				}
				o := webhookOutbox(t, b)
				ds := listWebhooks(t, b, o, &store.WebhookListParams{ResponseID: c.Response.ID})
				ds2 := listWebhooks(t, b, o, &store.WebhookListParams{ResponseID: c2.Response.ID})
				if len(ds) != tc.webhooks || len(ds2) != tc.webhooks {
					t.Fatalf("%d and %d deliveries, want %d each", len(ds), len(ds2), tc.webhooks)
				}
				for i, d := range ds {
					if d.EventID != p.Webhooks[i].EventID || d.Endpoint != p.Webhooks[i].Endpoint || d.Status != store.WebhookPending {
						t.Fatalf("delivery %d = %+v, want pending %+v", i, d, p.Webhooks[i])
					}
				}
			})
		}
	})

	// A commit the store refuses after the create was written (a step
	// that does not follow the create's, events that do not continue its
	// log) fails the call with ErrConflict and undoes the create: the run
	// and the response are unknown, and the same ids can be created
	// afterwards.
	t.Run("FailedCommitWritesNothing", func(t *testing.T) {
		t.Parallel()
		for _, tc := range []struct {
			name     string
			terminal bool // with what a terminal commit may add: a release, webhooks, a prune
			mutate   func(p *store.CommitParams)
		}{
			{name: "StepNotFirst", mutate: func(p *store.CommitParams) { p.Step = 2 }},
			{name: "SeqGap", mutate: func(p *store.CommitParams) { shiftSeq(p, 1) }},
			{name: "SeqRepeats", mutate: func(p *store.CommitParams) { shiftSeq(p, -1) }},
			{name: "TerminalStepNotFirst", terminal: true, mutate: func(p *store.CommitParams) { p.Step = 2 }},
			{name: "TerminalSeqGap", terminal: true, mutate: func(p *store.CommitParams) { shiftSeq(p, 1) }},
		} {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				b := h.setup(t)
				cc := createCommitter(t, b)
				c, p := createCommitParams(2, store.StatusInProgress)
				if tc.terminal {
					c, p = createCommitParams(2, store.StatusCompleted)
					p.Release, p.PruneKeep, p.Webhooks = true, 1, webhooks("response.completed", 1)
				}
				bad := *p
				bad.Events = append([]store.EventInput(nil), p.Events...)
				tc.mutate(&bad)
				_, _, err := cc.CreateCommit(b.ctx, c, &bad)
				requireIs(t, err, store.ErrConflict, "CreateCommit with a commit that does not follow the create")
				requireNothingWritten(t, b, c, "after the failed CreateCommit")
				_, res, err := cc.CreateCommit(b.ctx, c, p)
				requireNoError(t, err, "CreateCommit again, the commit mended")
				if res.NextSeq != 3 {
					t.Fatalf("NextSeq = %d, want 3", res.NextSeq)
				}
			})
		}
	})

	// A create the store refuses (its run or response exists) fails the
	// call as ResponseCreate would, and the commit is not written either.
	t.Run("FailedCreateWritesNothing", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t)
		cc := createCommitter(t, b)
		other := CreateResponse(b.ctx, t, b.s, nil)
		before := ReadRunState(b.ctx, t, b.s, other.Run.ID)

		c, p := createCommitParams(1, store.StatusInProgress)
		c.RunID, p.RunID = other.Run.ID, other.Run.ID
		_, _, err := cc.CreateCommit(b.ctx, c, p)
		requireIs(t, err, store.ErrConflict, "CreateCommit of a run that exists")
		_, err = b.s.ResponseGet(b.ctx, c.Response.ID)
		requireIs(t, err, store.ErrNotFound, "ResponseGet of the refused create's response")

		c, p = createCommitParams(1, store.StatusInProgress)
		c.Response.ID, p.ResponseID = other.Response.ID, other.Response.ID
		_, _, err = cc.CreateCommit(b.ctx, c, p)
		requireIs(t, err, store.ErrConflict, "CreateCommit of a response that exists")
		_, err = b.s.RunGet(b.ctx, c.RunID)
		requireIs(t, err, store.ErrNotFound, "RunGet of the refused create's run")

		requireSameState(t, ReadRunState(b.ctx, t, b.s, other.Run.ID), before, "the existing run")
	})

	// What CheckCreateCommit refuses is refused with ErrConflict before
	// anything is written: a create that would not claim a new run of its
	// own, a commit of another run or response. Each would be written
	// without the check (the continuation, the branch and the commit of
	// another run are valid calls of their own).
	t.Run("Refusals", func(t *testing.T) {
		t.Parallel()
		for _, tc := range []struct {
			name   string
			mutate func(c *store.ResponseCreateParams, p *store.CommitParams, done, active *store.ResponseCreateResult)
		}{
			{name: "NoCommit"},
			{name: "NoLeaseOwner", mutate: func(c *store.ResponseCreateParams, _ *store.CommitParams, _, _ *store.ResponseCreateResult) {
				c.LeaseOwner = ""
			}},
			{name: "Continuation", mutate: func(c *store.ResponseCreateParams, p *store.CommitParams, done, _ *store.ResponseCreateResult) {
				c.RunID, c.Response.PreviousResponseID, p.RunID = done.Run.ID, done.Response.ID, done.Run.ID
			}},
			{name: "Branch", mutate: func(c *store.ResponseCreateParams, _ *store.CommitParams, done, _ *store.ResponseCreateResult) {
				c.Response.PreviousResponseID, c.Branch = done.Response.ID, true
			}},
			{name: "Fork", mutate: func(c *store.ResponseCreateParams, _ *store.CommitParams, done, _ *store.ResponseCreateResult) {
				c.ForkedFrom = &store.ForkPoint{RunID: done.Run.ID, Step: 0}
			}},
			{name: "IdempotencyKey", mutate: func(c *store.ResponseCreateParams, _ *store.CommitParams, _, _ *store.ResponseCreateResult) {
				c.IdempotencyKey, c.RequestHash = NewID("key"), "h"
			}},
			{name: "Conversation", mutate: func(c *store.ResponseCreateParams, _ *store.CommitParams, _, _ *store.ResponseCreateResult) {
				c.Conversation = &store.ConversationTurn{ID: NewID("conv")}
			}},
			{name: "OtherRun", mutate: func(_ *store.ResponseCreateParams, p *store.CommitParams, _, active *store.ResponseCreateResult) {
				p.RunID, p.ResponseID, p.Epoch = active.Run.ID, active.Response.ID, active.Run.Lease.Epoch
			}},
			{name: "OtherResponse", mutate: func(_ *store.ResponseCreateParams, p *store.CommitParams, _, active *store.ResponseCreateResult) {
				p.ResponseID = active.Response.ID
			}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				b := h.setup(t)
				cc := createCommitter(t, b)
				done := CreateResponse(b.ctx, t, b.s, nil)
				Commit(b.ctx, t, b.s, done.Run.ID, &CommitOpts{Status: store.StatusCompleted})
				active := CreateResponse(b.ctx, t, b.s, nil)
				beforeDone := ReadRunState(b.ctx, t, b.s, done.Run.ID)
				beforeActive := ReadRunState(b.ctx, t, b.s, active.Run.ID)

				c, p := createCommitParams(1, store.StatusInProgress)
				newRun, newResp := c.RunID, c.Response.ID
				if tc.mutate == nil {
					p = nil
				} else {
					tc.mutate(c, p, done, active)
				}
				_, _, err := cc.CreateCommit(b.ctx, c, p)
				requireIs(t, err, store.ErrConflict, "CreateCommit")
				_, err = b.s.ResponseGet(b.ctx, newResp)
				requireIs(t, err, store.ErrNotFound, "ResponseGet of the refused create's response")
				_, err = b.s.RunGet(b.ctx, newRun)
				requireIs(t, err, store.ErrNotFound, "RunGet of the refused create's run")
				requireSameState(t, ReadRunState(b.ctx, t, b.s, done.Run.ID), beforeDone, "the finished run")
				requireSameState(t, ReadRunState(b.ctx, t, b.s, active.Run.ID), beforeActive, "the active run")
			})
		}
	})
}

// shiftSeq moves p's events by d sequence numbers.
func shiftSeq(p *store.CommitParams, d int64) {
	for i := range p.Events {
		p.Events[i].Seq += d
	}
}
