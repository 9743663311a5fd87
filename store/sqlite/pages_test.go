package sqlite_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/superstep/superstep/store"
	"github.com/superstep/superstep/store/sqlite"
	"github.com/superstep/superstep/store/storetest"
)

// TestCommitWALFrames guards the page layout of the commit path: a typical
// superstep of a lone run (two events, a 1 KB snapshot) must append at
// most maxFrames WAL frames (dirty pages) per commit on average, with the
// default page size. The count is deterministic for a given SQLite
// version.
//
// FourParts: a four-part checkpoint of which one small part changes. It
// was 8.2 with 1 KB pages when events and checkpoints were keyed WITHOUT
// ROWID tables and every commit rewrote the run's entry in
// runs_claimable; 5.0 since (docs/benchmarks.md), 4.88 at the end with 1 KB
// pages; 4.20 with 4 KB pages.
//
// Header: one 350-byte part changes every step, as a workflow's checkpoint
// header does (bench W1). It was 8.2 with 1 KB pages when a part over 256
// bytes was a blob row (and its overflow page); 5.35 inline; 4.30 with
// 4 KB pages.
//
// Silent: Header's checkpoint in a step that changes nothing the response
// shows (no events, no snapshot), as bench W1's steps before the last.
// With 1 KB pages: 4.03 when such a commit rewrote the response's row too,
// 3.02 since it leaves the row alone; with 4 KB pages 3.23 and 2.23.
func TestCommitWALFrames(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name      string
		maxFrames float64
		parts     func(step int64) []store.Part
		silent    bool
	}{
		{"FourParts", 4.6, func(step int64) []store.Part {
			parts := storetest.Parts(4, 1024, 0)
			parts[0].Data = fmt.Appendf(nil, "counter %d", step)
			return parts
		}, false},
		{"Header", 4.7, func(step int64) []store.Part {
			return []store.Part{{Name: "header", Data: fmt.Appendf(nil, "%0350d", step)}}
		}, false},
		{"Silent", 2.7, func(step int64) []store.Part {
			return []store.Part{{Name: "header", Data: fmt.Appendf(nil, "%0350d", step)}}
		}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			frames := commitFrames(t, tc.parts, tc.silent)
			t.Logf("%.2f WAL frames per commit", frames)
			if frames > tc.maxFrames {
				t.Fatalf("%.2f WAL frames per commit, want at most %.1f", frames, tc.maxFrames)
			}
		})
	}
}

// commitFrames returns the WAL frames appended per commit on average by
// 40 commits of a lone run with the given checkpoints: each with two
// events and a snapshot, or silent (neither).
func commitFrames(t *testing.T, parts func(step int64) []store.Part, silent bool) float64 {
	const commits = 40
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "frames.db")
	// No WAL checkpoint during the test, so the WAL holds every frame.
	s, err := sqlite.Open(ctx, path, &sqlite.Options{WALAutocheckpoint: 1 << 30})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c := storetest.CreateResponse(ctx, t, s, &storetest.ResponseOpts{Checkpoint: parts(0)})
	snap := make([]byte, 1024)
	walSize := func() int64 {
		fi, err := os.Stat(path + "-wal")
		if err != nil {
			t.Fatal(err)
		}
		return fi.Size()
	}
	w0 := walSize()
	for step := int64(1); step <= commits; step++ {
		p := &store.CommitParams{RunID: c.Run.ID, Epoch: c.Run.Lease.Epoch, Step: step, ResponseID: c.Response.ID,
			Status: store.StatusInProgress, Snapshot: snap, Checkpoint: parts(step), Events: []store.EventInput{
				{Seq: 2*step - 1, Type: "response.output_text.delta", Payload: fmt.Appendf(nil, `{"sequence_number":%d}`, 2*step-1)},
				{Seq: 2 * step, Type: "response.output_text.delta", Payload: fmt.Appendf(nil, `{"sequence_number":%d}`, 2*step)}}}
		if silent {
			p.Snapshot, p.Events = nil, nil
		}
		if _, err := s.Commit(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	return float64(walSize()-w0) / float64(sqlite.PageSizeDefault+24) / commits
}

// TestCommitWALBytes_LongRequest: a commit of a response whose request is
// long appends about what a short request's does. Before schema version
// 19 the request was in the response's row, and each commit that changed
// the row's size (here a snapshot one byte longer per step, as a growing
// reply's is) wrote the row again with all its overflow pages: 288,400
// WAL bytes per commit for a 256 KiB request against 16,480 for a short
// one.
func TestCommitWALBytes_LongRequest(t *testing.T) {
	t.Parallel()
	perCommit := func(request []byte) float64 {
		ctx := context.Background()
		path := filepath.Join(t.TempDir(), "long.db")
		s, err := sqlite.Open(ctx, path, &sqlite.Options{WALAutocheckpoint: 1 << 30})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		p := storetest.ResponseParams(nil)
		p.Response.Request = request
		c, err := s.ResponseCreate(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		walSize := func() int64 {
			fi, err := os.Stat(path + "-wal")
			if err != nil {
				t.Fatal(err)
			}
			return fi.Size()
		}
		const commits = 20
		w0 := walSize()
		for step := int64(1); step <= commits; step++ {
			if _, err := s.Commit(ctx, &store.CommitParams{RunID: c.Run.ID, Epoch: c.Run.Lease.Epoch, Step: step,
				ResponseID: c.Response.ID, Status: store.StatusInProgress, Snapshot: bytes.Repeat([]byte("s"), 100+int(step)),
				Checkpoint: []store.Part{{Name: "state", Data: fmt.Appendf(nil, "%d", step)}},
				Events:     []store.EventInput{{Seq: step, Type: "response.output_text.delta", Payload: fmt.Appendf(nil, `{"sequence_number":%d}`, step)}},
			}); err != nil {
				t.Fatal(err)
			}
		}
		return float64(walSize()-w0) / commits
	}
	short := perCommit([]byte(`{"model":"test-model","input":"hi"}`))
	long := perCommit(fmt.Appendf(nil, `{"model":"test-model","input":%q}`, bytes.Repeat([]byte("a"), 256<<10)))
	t.Logf("WAL bytes per commit: %.0f with a short request, %.0f with a 256 KiB one", short, long)
	if long > 1.5*short {
		t.Errorf("a commit wrote %.0f WAL bytes with a 256 KiB request, %.0f with a short one: want at most 1.5 times", long, short)
	}
}
