package postgres

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/superstep/superstep/store"
	"github.com/superstep/superstep/store/storetest"
)

// TestCommit_WritesOnlyWhatChanged: a commit whose small part changed
// stores it inline (no blob row) and counts its bytes; a small part that
// stopped changing becomes a blob once and a reference from then on; a
// commit that changes nothing the response shows leaves the response's
// row alone (same row version), one with events does not; alone and in a
// set batch; every checkpoint reads back whole, through a Store that
// knows nothing of the run too.
func TestCommit_WritesOnlyWhatChanged(t *testing.T) {
	t.Parallel()
	for _, batched := range []bool{false, true} {
		t.Run(fmt.Sprintf("batched=%v", batched), func(t *testing.T) {
			t.Parallel()
			schema := newSchemaName(t)
			s := openStore(t, schema, &Options{CommitBatchesInFlight: 1})
			ctx := t.Context()
			big := store.Part{Name: "big", Data: bytes.Repeat([]byte("B"), 4096)}
			small := func(v string) store.Part { return store.Part{Name: "small", Data: bytes.Repeat([]byte(v), 300)} }
			// Two runs, so that a batch holds two members (set path).
			var cs []*store.ResponseCreateResult
			for range 2 {
				cs = append(cs, storetest.CreateResponse(ctx, t, s, &storetest.ResponseOpts{Checkpoint: []store.Part{big, small("a")}}))
			}
			type step struct {
				small     string
				events    bool
				written   int64 // BytesWritten
				blobs     int   // the run's blob rows after it
				rowWrites bool  // the response's row is written
			}
			steps := []step{
				{small: "b", written: 300, blobs: 1},                                // changed: inline
				{small: "b", written: 300, blobs: 2},                                // unchanged: becomes a blob
				{small: "b", written: 0, blobs: 2},                                  // unchanged: a reference
				{small: "c", events: true, written: 300, blobs: 2, rowWrites: true}, // changed, with events
			}
			want := map[int64][]store.Part{0: {big, small("a")}}
			for i, st := range steps {
				var ps []*store.CommitParams
				before := map[string]string{}
				for _, c := range cs {
					p := storetest.NextCommit(ctx, t, s, c.Run.ID, &storetest.CommitOpts{NoEvents: !st.events,
						Checkpoint: []store.Part{big, small(st.small)}})
					if !st.events {
						p.Snapshot = nil
					}
					ps = append(ps, p)
					before[c.Run.ID] = rowVersion(ctx, t, s, c.Response.ID)
				}
				want[int64(i+1)] = ps[0].Checkpoint
				results := map[*store.CommitParams]*store.CommitResult{}
				if batched {
					stats := s.CommitStats()
					f := holdCommits(t, s)
					ch := commitAll(ctx, s, ps)
					f.waitQueued(t, len(ps))
					f.release(t)
					for range ps {
						r := <-ch
						if r.err != nil {
							t.Fatalf("step %d: %v", i+1, r.err)
						}
						results[r.p] = r.res
					}
					if s.CommitStats().SetBatches != stats.SetBatches+1 {
						t.Fatalf("step %d: not written as one set batch: %+v", i+1, s.CommitStats())
					}
				} else {
					for _, p := range ps {
						res, err := s.Commit(ctx, p)
						if err != nil {
							t.Fatalf("step %d: %v", i+1, err)
						}
						results[p] = res
					}
				}
				for j, c := range cs {
					res := results[ps[j]]
					var blobs int
					if err := s.pool.QueryRow(ctx, "SELECT count(*) FROM blobs WHERE run_id = $1", c.Run.ID).Scan(&blobs); err != nil {
						t.Fatal(err)
					}
					written := rowVersion(ctx, t, s, c.Response.ID) != before[c.Run.ID]
					if res.BytesWritten != st.written || blobs != st.blobs || written != st.rowWrites {
						t.Fatalf("step %d: BytesWritten %d, %d blob rows, response row written %v; want %d, %d, %v",
							i+1, res.BytesWritten, blobs, written, st.written, st.blobs, st.rowWrites)
					}
				}
			}
			cold := openStore(t, schema, nil)
			for _, r := range []*Store{s, cold} {
				for step, parts := range want {
					cp, err := r.CheckpointGet(ctx, cs[1].Run.ID, step)
					if err != nil || len(cp.Parts) != len(parts) {
						t.Fatalf("CheckpointGet(%d): %+v, %v", step, cp, err)
					}
					for k := range parts {
						if cp.Parts[k].Name != parts[k].Name || !bytes.Equal(cp.Parts[k].Data, parts[k].Data) {
							t.Fatalf("checkpoint %d part %d: %q %.20q, want %q %.20q", step, k, cp.Parts[k].Name, cp.Parts[k].Data,
								parts[k].Name, parts[k].Data)
						}
					}
				}
			}
			// A prune keeps the blobs the kept checkpoints reference.
			p := storetest.NextCommit(ctx, t, s, cs[0].Run.ID, &storetest.CommitOpts{Checkpoint: []store.Part{big, small("b")}})
			p.PruneKeep = 1
			if res, err := s.Commit(ctx, p); err != nil || res.Pruned != 5 {
				t.Fatalf("commit with a prune: %+v, %v; want 5 pruned (steps 0 to 4)", res, err)
			}
			if cp, err := cold.CheckpointGetLast(ctx, cs[0].Run.ID); err != nil || !bytes.Equal(cp.Parts[0].Data, big.Data) ||
				!bytes.Equal(cp.Parts[1].Data, small("b").Data) {
				t.Fatalf("last checkpoint after the prune: %v", err)
			}
			checkStore(t, s)
		})
	}
}

// rowVersion is the version of the response's row (its ctid and xmin):
// it changes when the row is written.
func rowVersion(ctx context.Context, t *testing.T, s *Store, responseID string) string {
	t.Helper()
	var v string
	if err := s.pool.QueryRow(ctx, "SELECT ctid::text || '/' || xmin::text FROM responses WHERE id = $1", responseID).Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// TestMigrateStepRows builds a version-15 schema holding a run midway as
// that version wrote it (every part a blob row: a 2 KB part unchanged and
// sent by reference, a small one changing, an empty one and a duplicate;
// the response's row written by each commit), opens it with this build,
// which migrates it to checkpoint manifests, and requires every
// checkpoint and the response to read back as written; then the run goes
// on (a silent commit, a commit with a changed small part, a prune that
// keeps the old blob rows the new checkpoints reference) and reads back
// whole.
func TestMigrateStepRows(t *testing.T) {
	t.Parallel()
	requireDB(t)
	ctx := t.Context()
	schema := newSchemaName(t)
	pool := migrateSchemaTo(t, schema, 15)
	at := func(us int64) time.Time { return time.UnixMicro(us).UTC() }
	created := at(1_700_000_000_000_000)
	if _, err := pool.Exec(ctx, `INSERT INTO runs (id, model, head_response_id, last_step, lease_owner, lease_epoch,
		lease_expires_at, active, created_at, updated_at) VALUES ('run_old', 'm', 'resp_old', 0, 'host-a', 1, $1, true, $2, $2)`,
		created.Add(100*time.Hour), created); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO responses (id, run_id, model, status, snapshot, next_seq, commit_step, start_step,
		created_at, updated_at) VALUES ('resp_old', 'run_old', 'm', 'in_progress', '{"s":0}', 0, 0, 0, $1, $1)`, created); err != nil {
		t.Fatal(err)
	}
	big := store.Part{Name: "big", Data: bytes.Repeat([]byte("B"), 2048)}
	parts := func(step int64) []store.Part {
		small := fmt.Appendf(nil, "small-%d", step)
		return []store.Part{big, {Name: "small", Data: small}, {Name: "empty", Data: []byte{}}, {Name: "dup", Data: small}}
	}
	want := map[int64][]store.Part{}
	stored := map[[32]byte]bool{}
	// Step 0 as ResponseCreate wrote it, then steps 1 and 2 by version
	// 15's superstep_commit.
	for step := int64(0); step <= 2; step++ {
		ps := parts(step)
		want[step] = ps
		var names []string
		var hashes, newHashes, newData, refs [][]byte
		var size int64
		seen := map[[32]byte]bool{}
		for _, p := range ps {
			h := sha256.Sum256(p.Data)
			names, hashes, size = append(names, p.Name), append(hashes, h[:]), size+int64(len(p.Data))
			if seen[h] {
				continue
			}
			seen[h] = true
			if stored[h] {
				refs = append(refs, h[:])
			} else {
				newHashes, newData = append(newHashes, h[:]), append(newData, p.Data)
			}
			stored[h] = true
		}
		now := created.Add(time.Duration(step) * time.Second)
		if step == 0 {
			if _, err := pool.Exec(ctx, `INSERT INTO blobs (run_id, hash, size, data)
				SELECT 'run_old', u.h, octet_length(u.d), u.d FROM unnest($1::bytea[], $2::bytea[]) AS u(h, d)`, newHashes, newData); err != nil {
				t.Fatal(err)
			}
			if _, err := pool.Exec(ctx, `INSERT INTO checkpoints (run_id, step, parent_step, part_names, part_hashes, size, created_at)
				VALUES ('run_old', 0, -1, $1, $2, $3, $4)`, names, hashes, size, now); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if _, err := pool.Exec(ctx, `SELECT superstep_commit('run_old', 1, $1, 'resp_old', 0, 0, 0, NULL, $2, $3, $4, $5, $6, $7,
			'in_progress', $8, NULL, NULL, $9, false, '', '', false)`,
			step, names, hashes, nonNilHashes(newHashes), nonNilHashes(newData), nonNilHashes(refs), size,
			fmt.Appendf(nil, `{"s":%d}`, step), now); err != nil {
			t.Fatalf("version 15 commit of step %d: %v", step, err)
		}
	}
	pool.Close()

	s := openStore(t, schema, nil)
	if v := schemaVersionOf(t, s); v < 16 || v != latestVersion(t) {
		t.Fatalf("schema version %d after Open, want the latest, %d (at least 16)", v, latestVersion(t))
	}
	requireCheckpoints(t, s, "run_old", want, "after migration")
	r, err := s.ResponseGet(ctx, "resp_old")
	if err != nil || r.CommitStep != 2 || !r.UpdatedAt.Equal(created.Add(2*time.Second)) || string(r.Snapshot) != `{"s":2}` {
		t.Fatalf("response after migration: %+v, %v", r, err)
	}
	checkStore(t, s)
	// The run goes on: a silent commit, then one with a small change, the
	// big part unchanged (stored by version 15, not known to this Store).
	for step := int64(3); step <= 4; step++ {
		p := &store.CommitParams{RunID: "run_old", Epoch: 1, Step: step, ResponseID: "resp_old", Status: store.StatusInProgress,
			Checkpoint: parts(step), Now: created.Add(time.Duration(step) * time.Second)}
		if step == 3 {
			p.Checkpoint = parts(2)
		}
		want[step] = p.Checkpoint
		if _, err := s.Commit(ctx, p); err != nil {
			t.Fatalf("commit of step %d after migration: %v", step, err)
		}
	}
	r, err = s.ResponseGet(ctx, "resp_old")
	if err != nil || r.CommitStep != 4 || !r.UpdatedAt.Equal(created.Add(4*time.Second)) || string(r.Snapshot) != `{"s":2}` {
		t.Fatalf("response after silent commits: %+v, %v", r, err)
	}
	requireCheckpoints(t, openStore(t, schema, nil), "run_old", want, "after commits following the migration")
	if n, err := s.CheckpointPrune(ctx, &store.CheckpointPruneParams{RunID: "run_old", KeepLast: 2}); err != nil || n != 3 {
		t.Fatalf("CheckpointPrune: %d, %v; want 3", n, err)
	}
	delete(want, 0)
	delete(want, 1)
	delete(want, 2)
	requireCheckpoints(t, openStore(t, schema, nil), "run_old", want, "after a prune")
	checkStore(t, s)
}

// nonNilHashes is bs, or an empty slice for nil (a NOT NULL array).
func nonNilHashes(bs [][]byte) [][]byte {
	if bs == nil {
		return [][]byte{}
	}
	return bs
}

// requireCheckpoints fails unless each checkpoint of want reads back with
// those parts.
func requireCheckpoints(t *testing.T, s *Store, runID string, want map[int64][]store.Part, what string) {
	t.Helper()
	for step, parts := range want {
		cp, err := s.CheckpointGet(t.Context(), runID, step)
		if err != nil || len(cp.Parts) != len(parts) {
			t.Fatalf("%s: CheckpointGet(%d): %+v, %v", what, step, cp, err)
		}
		for k := range parts {
			if cp.Parts[k].Name != parts[k].Name || !bytes.Equal(cp.Parts[k].Data, parts[k].Data) || cp.Parts[k].Data == nil {
				t.Fatalf("%s: checkpoint %d part %d: %q %.20q, want %q %.20q", what, step, k, cp.Parts[k].Name, cp.Parts[k].Data,
					parts[k].Name, parts[k].Data)
			}
		}
	}
}

// TestCancelOrdersWithSilentCommits races a cancel with commits that leave
// the response's row alone: whichever order they take, the cancel reads
// the run's last commit (its CommitStep is the run's LastStep, the commits
// after it refused with ErrCancelled) and the response reads as the
// cancel left it.
func TestCancelOrdersWithSilentCommits(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := t.Context()
	for i := range 20 {
		c := storetest.CreateResponse(ctx, t, s, nil)
		storetest.Commit(ctx, t, s, c.Run.ID, nil)
		done := make(chan error, 1)
		go func() {
			for step := int64(2); ; step++ {
				p := storetest.NextCommit(ctx, t, s, c.Run.ID, &storetest.CommitOpts{NoEvents: true})
				p.Snapshot = nil
				if _, err := s.Commit(ctx, p); err != nil {
					done <- err
					return
				}
			}
		}()
		time.Sleep(time.Duration(i%5) * time.Millisecond)
		cancelled, err := s.ResponseCancel(ctx, c.Response.ID)
		if err != nil {
			t.Fatal(err)
		}
		if err := <-done; !errors.Is(err, store.ErrCancelled) {
			t.Fatalf("commit after the cancel: %v, want ErrCancelled", err)
		}
		run, err := s.RunGet(ctx, c.Run.ID)
		if err != nil {
			t.Fatal(err)
		}
		got, err := s.ResponseGet(ctx, c.Response.ID)
		if err != nil {
			t.Fatal(err)
		}
		if cancelled.CommitStep != run.LastStep || got.CommitStep != run.LastStep || !got.UpdatedAt.Equal(cancelled.UpdatedAt) {
			t.Fatalf("round %d: cancel read CommitStep %d, response reads %d (updated %v, cancel %v), run at step %d", i,
				cancelled.CommitStep, got.CommitStep, got.UpdatedAt, cancelled.UpdatedAt, run.LastStep)
		}
		// What the cancel stored, not what a read derives (a cancelled
		// response's row is read as it is only once it is finished): the
		// run's lock orders the cancel's write after the commits.
		var stored int64
		if err := s.pool.QueryRow(ctx, "SELECT commit_step FROM responses WHERE id = $1", c.Response.ID).Scan(&stored); err != nil {
			t.Fatal(err)
		}
		if stored != run.LastStep {
			t.Fatalf("round %d: the cancel stored commit_step %d, run at step %d", i, stored, run.LastStep)
		}
	}
	checkStore(t, s)
}
