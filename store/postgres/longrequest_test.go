package postgres

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/superstep/superstep/internal/jsonstr"
	"github.com/superstep/superstep/store"
	"github.com/superstep/superstep/store/storetest"
)

// TestCommit_LongRequestNotRewritten: commits that change the size of a
// response's row (a longer snapshot each step) leave its long request
// where it is, in the responses table's TOAST relation, which does not
// grow: PostgreSQL keeps an unchanged TOASTed value by reference in the
// row's new version. SQLite needed a table of its own for the same
// (store/sqlite TestCommitWALBytes_LongRequest).
func TestCommit_LongRequestNotRewritten(t *testing.T) {
	t.Parallel()
	s := openStore(t, newSchemaName(t), nil)
	ctx := t.Context()
	noise := make([]byte, 192<<10)
	_, _ = rand.Read(noise)
	p := storetest.ResponseParams(nil)
	p.Response.Request = fmt.Appendf(nil, `{"model":"test-model","input":%q}`, base64.StdEncoding.EncodeToString(noise))
	c, err := s.ResponseCreate(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	toastSize := func() int64 {
		var n int64
		if err := s.pool.QueryRow(ctx, `SELECT pg_relation_size(reltoastrelid) FROM pg_class
			WHERE oid = 'responses'::regclass`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := toastSize()
	if before < 192<<10 {
		t.Fatalf("the responses table's TOAST relation holds %d bytes, want the request's (at least %d)", before, 192<<10)
	}
	const commits = 10
	for step := int64(1); step <= commits; step++ {
		cp := storetest.NextCommit(ctx, t, s, c.Run.ID, nil)
		cp.Snapshot = fmt.Appendf(nil, `{"id":%q,"status":"in_progress","pad":"%0*d"}`, c.Response.ID, int(step), 0)
		if _, err := s.Commit(ctx, cp); err != nil {
			t.Fatal(err)
		}
	}
	if after := toastSize(); after > before+64<<10 {
		t.Fatalf("the TOAST relation grew from %d to %d bytes over %d commits: the request was written again", before, after, commits)
	}
	got, err := s.ResponseGet(ctx, c.Response.ID)
	if err != nil || string(got.Request) != string(p.Response.Request) || got.Status != store.StatusInProgress {
		t.Fatalf("ResponseGet: %d request bytes, status %v (%v)", len(got.Request), got.Status, err)
	}
}

// TestRequestPartStoredByReference: a new run's first checkpoint whose
// part holds the request's long input stores that part in a few bytes,
// by reference to the request, created alone and with its first commit
// (the conformance case RequestParts reads both back).
func TestRequestPartStoredByReference(t *testing.T) {
	t.Parallel()
	s := openStore(t, newSchemaName(t), nil)
	ctx := t.Context()
	text := strings.Repeat("words <and> more ", 4000)
	header := fmt.Appendf(nil, `{"queue":[{"msg":%s}]}`, jsonstr.Append(nil, text))
	for _, fused := range []bool{false, true} {
		p := storetest.ResponseParams(nil)
		p.Response.Request = fmt.Appendf(nil, `{"model":"test-model","input":"%s"}`, text)
		p.Checkpoint = []store.Part{{Name: "header", Data: header}}
		if fused {
			if _, _, err := s.CreateCommit(ctx, p, &store.CommitParams{RunID: p.RunID, Epoch: store.NewRunEpoch, Step: 1,
				ResponseID: p.Response.ID, Status: store.StatusInProgress, Checkpoint: []store.Part{{Name: "header", Data: []byte("{}")}},
				Events: []store.EventInput{{Seq: 1, Type: "response.in_progress", Payload: []byte(`{}`)}}}); err != nil {
				t.Fatal(err)
			}
		} else if _, err := s.ResponseCreate(ctx, p); err != nil {
			t.Fatal(err)
		}
		var stored int64
		if err := s.pool.QueryRow(ctx, "SELECT sum(octet_length(data)) FROM blobs WHERE run_id = $1", p.RunID).Scan(&stored); err != nil {
			t.Fatal(err)
		}
		if stored > 200 {
			t.Fatalf("fused %v: the %d-byte part is stored in %d bytes, want a reference of at most 200", fused, len(header), stored)
		}
		cp, err := s.CheckpointGet(ctx, p.RunID, 0)
		if err != nil || !bytes.Equal(cp.Parts[0].Data, header) {
			t.Fatalf("fused %v: CheckpointGet: %v", fused, err)
		}
	}
}

// deleteBetween is a rowQuerier that, before it reads the request a blob
// refers to, runs del: a delete that lands between the blob's read and
// the request's.
type deleteBetween struct {
	rowQuerier
	del  func()
	done bool
}

func (q *deleteBetween) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if !q.done && strings.HasPrefix(sql, "SELECT request FROM responses") {
		q.done = true
		q.del()
	}
	return q.rowQuerier.QueryRow(ctx, sql, args...)
}

// TestResolveBlobs_RequestDeletedMeanwhile: a reader that read a blob
// referring to a response's request, when that response is deleted (its
// run going on) before the reader reads the request, reads the blob again
// (rewritten as its part by the delete) and gets the part, not a
// corruption error.
func TestResolveBlobs_RequestDeletedMeanwhile(t *testing.T) {
	t.Parallel()
	s := openStore(t, newSchemaName(t), nil)
	ctx := t.Context()
	runID, firstID, part := storetest.RequestPartRun(ctx, t, s)
	b := blob{sum: sha256.Sum256(part), ref: true}
	if err := s.pool.QueryRow(ctx, "SELECT data FROM blobs WHERE run_id = $1 AND hash = $2", runID, b.sum[:]).Scan(&b.data); err != nil {
		t.Fatal(err)
	}
	q := &deleteBetween{rowQuerier: s.pool, del: func() {
		if err := s.ResponseDelete(ctx, firstID); err != nil {
			t.Error(err)
		}
	}}
	blobs := []blob{b}
	err := resolveBlobs(ctx, q, runID, 0, blobs)
	if !q.done {
		t.Fatal("the blob was not resolved as a reference")
	}
	if err != nil || !bytes.Equal(blobs[0].data, part) {
		t.Fatalf("resolveBlobs: %v", err)
	}
}
