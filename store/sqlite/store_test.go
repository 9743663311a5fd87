package sqlite_test

import (
	"context"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"

	"github.com/superstep/superstep/store"
	"github.com/superstep/superstep/store/sqlite"
	"github.com/superstep/superstep/store/storetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestStore runs the conformance suite once per setting that changes the
// commit path.
func TestStore(t *testing.T) {
	for _, sync := range []sqlite.Synchronous{sqlite.SynchronousFull, sqlite.SynchronousNormal} {
		t.Run(string(sync), func(t *testing.T) {
			t.Parallel()
			storetest.Run(t, harness(&sqlite.Options{Synchronous: sync}))
		})
	}
}

// harness returns the storetest harness for SQLite stores opened with opts.
func harness(opts *sqlite.Options) storetest.Harness {
	open := func(t *testing.T, path string) store.Store {
		t.Helper()
		s, err := sqlite.Open(context.Background(), path, opts)
		if err != nil {
			t.Fatalf("sqlite.Open(%s): %v", path, err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	return storetest.Harness{
		New:  func(t *testing.T) store.Store { return open(t, filepath.Join(t.TempDir(), "superstep.db")) },
		DSN:  func(t *testing.T, s store.Store) string { return s.(*sqlite.Store).Path() },
		Open: open,
		FaultPoints: []string{
			"append.events_inserted", "append.response_updated", "checkpoint.blob_inserted", "checkpoint.blobs_inserted",
			"commit.checked", "commit.checkpoint_inserted", "commit.events_inserted", "commit.response_updated",
			"commit.run_updated", "commit.webhooks_inserted", "create.checkpoint_inserted", "create.events_inserted", "create.response_inserted",
			"create.run_written", "delete.response_deleted", "delete.run_statement", "lease.checked",
			"prune.blob_deleted", "prune.checkpoints_deleted",
		},
	}
}
