package sqlite_test

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/superstep/superstep/store"
	"github.com/superstep/superstep/store/sqlite"
	"github.com/superstep/superstep/store/storetest"
)

// TestCheckFindsCorruption damages a database behind the store's back and
// requires store.Check to report each kind of damage as ErrCorrupt.
func TestCheckFindsCorruption(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, damage, want string
	}{
		{"EventGap", "DELETE FROM event_records WHERE first_seq = 1", "where 1 was expected"},
		{"RecordRangeLongerThanData", "UPDATE event_records SET last_seq = last_seq + 1 WHERE first_seq = 1", "corrupt"},
		{"RecordDataTruncated", "UPDATE event_records SET data = substr(data, 1, 3) WHERE first_seq = 3", "corrupt"},
		{"RecordStepBeyondLastStep", "UPDATE event_records SET step = 7 WHERE first_seq = 3", "has step 7"},
		{"NextSeqAhead", "UPDATE responses SET next_seq = next_seq + 1", "NextSeq"},
		{"LastCheckpointMissing", "DELETE FROM checkpoints WHERE step = 2", "last commit"},
		{"InlinePartTampered", "UPDATE checkpoints SET manifest = CAST(replace(CAST(manifest AS TEXT), 'step-2', 'step-9') AS BLOB) WHERE step = 2", "does not match its hash"},
		{"ParentAfterStep", "UPDATE checkpoints SET parent_step = 5 WHERE step = 1", "parent"},
		{"BlobTampered", "UPDATE blobs SET data = x'00'", "do not match their hash"},
		{"BlobMissing", "DELETE FROM blobs", "blob missing"},
		{"ActiveWithoutHead", "UPDATE runs SET head_response_id = 'resp_gone'", "does not exist"},
		{"CheckpointBeyondLastStep", "UPDATE runs SET last_step = 1", "beyond LastStep"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			path := filepath.Join(t.TempDir(), "s.db")
			s, err := sqlite.Open(ctx, path, nil)
			if err != nil {
				t.Fatal(err)
			}
			c := storetest.CreateResponse(ctx, t, s, nil)
			storetest.Commit(ctx, t, s, c.Run.ID, nil)
			// Two parts stored as blobs and one small part kept inline.
			parts := append(storetest.Parts(2, 1000, 1), store.Part{Name: "small", Data: []byte("step-2")})
			storetest.Commit(ctx, t, s, c.Run.ID, &storetest.CommitOpts{Checkpoint: parts})
			if err := store.Check(ctx, s); err != nil {
				t.Fatalf("Check before damage: %v", err)
			}
			s.Close()
			db, err := sql.Open("sqlite3", path)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := db.Exec(tc.damage); err != nil {
				t.Fatalf("%s: %v", tc.damage, err)
			}
			db.Close()
			s, err = sqlite.Open(ctx, path, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			err = store.Check(ctx, s)
			if !errors.Is(err, store.ErrCorrupt) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Check after %q: %v, want ErrCorrupt mentioning %q", tc.damage, err, tc.want)
			}
		})
	}
}
