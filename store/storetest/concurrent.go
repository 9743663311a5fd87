package storetest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/superstep/superstep/store"
)

// testCommitConcurrent: commits of many runs made at once (which a store
// may write together, as group commit does) each succeed or fail alone.
func testCommitConcurrent(t *testing.T, h Harness) {
	t.Parallel()

	t.Run("OneFencedOneInvalid", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t)
		const n = 16
		type member struct {
			c      *store.ResponseCreateResult
			p      *store.CommitParams
			before *RunState
			want   error // nil: succeeds
		}
		ms := make([]*member, n)
		for i := range ms {
			c := CreateResponse(b.ctx, t, b.s, nil)
			Commit(b.ctx, t, b.s, c.Run.ID, nil)
			ms[i] = &member{c: c}
		}
		// Member 5 lost its lease to another host; member 11's events
		// do not continue its log; member 2 completes its response;
		// member 7 prunes old checkpoints.
		requireNoError(t, b.s.LeaseRelease(b.ctx, &store.LeaseParams{RunID: ms[5].c.Run.ID, Owner: LeaseOwnerDefault,
			Epoch: ms[5].c.Run.Lease.Epoch}), "LeaseRelease")
		claimed, err := b.s.LeaseClaim(b.ctx, &store.LeaseClaimParams{Owner: "host-b", Duration: time.Hour})
		requireNoError(t, err, "LeaseClaim")
		if len(claimed) != 1 || claimed[0].ID != ms[5].c.Run.ID {
			t.Fatalf("claimed %+v, want run %s", claimed, ms[5].c.Run.ID)
		}
		for i, m := range ms {
			o := &CommitOpts{Events: 2 + i%3, Epoch: m.c.Run.Lease.Epoch}
			switch i {
			case 2:
				o.Status = store.StatusCompleted
			case 11:
				resp, err := b.s.ResponseGet(b.ctx, m.c.Response.ID)
				requireNoError(t, err, "ResponseGet")
				o.Seq = resp.NextSeq + 1
			}
			m.p = NextCommit(b.ctx, t, b.s, m.c.Run.ID, o)
			if i == 7 {
				m.p.PruneKeep = 1
			}
			m.before = ReadRunState(b.ctx, t, b.s, m.c.Run.ID)
		}
		ms[5].want, ms[11].want = store.ErrFenced, store.ErrConflict
		var wg sync.WaitGroup
		errs := make([]error, n)
		start := make(chan struct{})
		for i, m := range ms {
			wg.Go(func() {
				<-start
				_, errs[i] = b.s.Commit(b.ctx, m.p)
			})
		}
		close(start)
		wg.Wait()
		for i, m := range ms {
			what := fmt.Sprintf("member %d", i)
			if m.want != nil {
				requireIs(t, errs[i], m.want, what)
				requireSameState(t, ReadRunState(b.ctx, t, b.s, m.c.Run.ID), m.before, what+" (failed)")
				continue
			}
			requireNoError(t, errs[i], what)
			st := ReadRunState(b.ctx, t, b.s, m.c.Run.ID)
			resp := st.Responses[0]
			if st.Run.LastStep != m.p.Step || resp.NextSeq != m.before.Responses[0].NextSeq+int64(len(m.p.Events)) ||
				resp.Status != m.p.Status || len(st.Events[resp.ID]) != int(resp.NextSeq) {
				t.Errorf("%s after its commit: %s", what, st)
			}
			if i == 7 && len(st.Checkpoints) >= len(m.before.Checkpoints)+1 {
				t.Errorf("%s: %d checkpoints after a pruning commit, %d before", what, len(st.Checkpoints), len(m.before.Checkpoints))
			}
		}
	})
}
