package verify

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/superstep/superstep/store"
	"github.com/superstep/superstep/store/sqlite"
)

// TestLoad writes a response whose log spans several EventList pages into
// a real SQLite store, then loads and checks it.
func TestLoad(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "verify.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	outputs := make([]string, store.EventListLimitDefault) // 2 events each: more than two pages
	for i := range outputs {
		outputs[i] = "out"
	}
	r := &run{id: "resp_load", outputs: outputs}
	log, rec := r.log(), r.record(r.log())
	created, err := s.ResponseCreate(ctx, &store.ResponseCreateParams{
		Response: &store.Response{ID: r.id, Model: "m", Status: store.StatusQueued, Request: []byte(`{}`), Snapshot: log[0].Payload},
		RunID:    "run_load", Checkpoint: []store.Part{{Name: "h", Data: []byte("0")}},
		Events:     []store.EventInput{{Seq: 0, Type: log[0].Type, Payload: log[0].Payload}},
		LeaseOwner: "test", LeaseDuration: time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	var evs []store.EventInput
	for _, e := range log[1:] {
		evs = append(evs, store.EventInput{Seq: e.Seq, Type: e.Type, Payload: e.Payload})
	}
	_, err = s.Commit(ctx, &store.CommitParams{
		RunID: "run_load", Epoch: created.Run.Lease.Epoch, Step: 1, Checkpoint: []store.Part{{Name: "h", Data: []byte("1")}},
		ResponseID: r.id, Events: evs, Status: rec.Status, Snapshot: rec.Snapshot,
	})
	if err != nil {
		t.Fatal(err)
	}
	gotRec, gotLog, err := Load(ctx, s, r.id)
	if err != nil {
		t.Fatal(err)
	}
	if len(gotLog) != len(log) {
		t.Fatalf("Load returned %d events, want %d", len(gotLog), len(log))
	}
	ref := r.outcome()
	rep := Check(&Input{Responses: []ResponseInput{{ID: r.id, Log: gotLog, Record: gotRec, Reference: ref,
		Clients: []ClientView{{Name: "c", Events: received(log, 0, len(log))}}}}})
	requireExactly(t, rep)
	// The store's copy must still be judged: a different reference fails.
	ref.Output = ref.Output[1:]
	requireExactly(t, Check(&Input{Responses: []ResponseInput{{ID: r.id, Log: gotLog, Reference: ref}}}), InvReference)
	if _, _, err := Load(ctx, s, "resp_missing"); err == nil {
		t.Fatal("Load of a missing response: no error")
	}
	var snap map[string]any
	if err := json.Unmarshal(gotRec.Snapshot, &snap); err != nil || snap["status"] != "completed" {
		t.Fatalf("snapshot %s: %v", gotRec.Snapshot, err)
	}
}
