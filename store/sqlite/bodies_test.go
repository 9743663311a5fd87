package sqlite_test

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/superstep/superstep/internal/jsonstr"
	"github.com/superstep/superstep/store"
	"github.com/superstep/superstep/store/sqlite"
	"github.com/superstep/superstep/store/storetest"
)

// TestResponseBodies: a response whose request and input hold 1 KiB or
// more is stored with them apart (response_bodies), created alone or with
// its first commit; it reads back byte for byte, and deleting it leaves
// no body behind.
func TestResponseBodies(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "bodies.db")
	s, err := sqlite.Open(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	request := append([]byte(`{"model":"test-model","input":"`), append(bytes.Repeat([]byte("x"), 8<<10), `"}`...)...)
	input := bytes.Repeat([]byte("y"), 700)

	alone := storetest.ResponseParams(nil)
	alone.Response.Request, alone.Response.Input = request, input
	if _, err := s.ResponseCreate(ctx, alone); err != nil {
		t.Fatal(err)
	}
	fused := storetest.ResponseParams(nil)
	fused.Response.Request, fused.Response.Input = request, nil
	fused.Response.Status = store.StatusInProgress
	if _, _, err := s.CreateCommit(ctx, fused, &store.CommitParams{RunID: fused.RunID, Epoch: store.NewRunEpoch, Step: 1,
		ResponseID: fused.Response.ID, Status: store.StatusCompleted, Checkpoint: []store.Part{{Name: "state", Data: []byte("1")}},
		Events: []store.EventInput{{Seq: 1, Type: "response.completed", Payload: []byte(`{}`)}}}); err != nil {
		t.Fatal(err)
	}
	ro, err := sql.Open("sqlite3", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	bodies := func() int {
		var n int
		if err := ro.QueryRow("SELECT count(*) FROM response_bodies").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := bodies(); n != 2 {
		t.Fatalf("%d rows in response_bodies, want 2", n)
	}
	for _, p := range []*store.ResponseCreateParams{alone, fused} {
		got, err := s.ResponseGet(ctx, p.Response.ID)
		if err != nil {
			t.Fatal(err)
		}
		listed, err := s.ResponseListByRun(ctx, p.RunID)
		if err != nil || len(listed) != 1 {
			t.Fatalf("ResponseListByRun: %d (%v)", len(listed), err)
		}
		for _, r := range []*store.Response{got, listed[0]} {
			if !bytes.Equal(r.Request, p.Response.Request) || !bytes.Equal(r.Input, p.Response.Input) || (r.Input == nil) != (p.Response.Input == nil) {
				t.Errorf("%s: request %d bytes, input %d (nil %v); want %d, %d (nil %v)", p.Response.ID,
					len(r.Request), len(r.Input), r.Input == nil, len(p.Response.Request), len(p.Response.Input), p.Response.Input == nil)
			}
		}
		if err := s.ResponseDelete(ctx, p.Response.ID); err != nil {
			t.Fatal(err)
		}
	}
	if n := bodies(); n != 0 {
		t.Fatalf("%d rows left in response_bodies after deleting both responses, want 0", n)
	}
}

// TestRequestPartStoredByReference: a new run's first checkpoint whose
// part holds the request's long input stores that part in a few bytes,
// by reference to the request (the conformance case RequestParts reads it
// back), where it held the input a second time.
func TestRequestPartStoredByReference(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "ref.db")
	s, err := sqlite.Open(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	text := bytes.Repeat([]byte("words <and> more "), 4000)
	p := storetest.ResponseParams(nil)
	p.Response.Request = fmt.Appendf(nil, `{"model":"test-model","input":"%s"}`, text)
	header := fmt.Appendf(nil, `{"queue":[{"msg":%s}]}`, jsonstr.Append(nil, string(text)))
	p.Checkpoint = []store.Part{{Name: "header", Data: header}}
	if _, err := s.ResponseCreate(ctx, p); err != nil {
		t.Fatal(err)
	}
	ro, err := sql.Open("sqlite3", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	var stored int
	if err := ro.QueryRow("SELECT sum(length(data)) FROM blobs").Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if stored > 200 {
		t.Fatalf("the %d-byte part is stored in %d bytes, want a reference of at most 200", len(header), stored)
	}
	cp, err := s.CheckpointGet(ctx, p.RunID, 0)
	if err != nil || !bytes.Equal(cp.Parts[0].Data, header) {
		t.Fatalf("CheckpointGet: %v", err)
	}
}
