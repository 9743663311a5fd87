package postgres

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"testing"

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
