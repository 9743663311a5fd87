package crash

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"github.com/superstep/superstep/verify"
)

// TestCrash_SQLite_ResumesAtOnce kills the server in the middle of a long
// run and requires the restarted server to continue it at once: with
// SQLite one process owns the file, so recovery claims every unfinished
// run on start instead of waiting for the dead process's lease (15 s by
// default) to expire.
func TestCrash_SQLite_ResumesAtOnce(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cl := newCluster(binary, filepath.Join(dir, "superstep.db"), dir)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	t.Cleanup(cl.killAtCleanup)
	if err := cl.start(ctx); err != nil {
		t.Fatal(err)
	}
	base, err := cl.current(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c := newClient(cl, base)
	resp, err := c.Responses.New(ctx, responses.ResponseNewParams{
		Model: "demo.silent", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hello")},
		Background: openai.Bool(true), Store: openai.Bool(true),
		Metadata: map[string]string{"steps": "500", "step_delay_ms": "20"},
	})
	if err != nil {
		t.Fatal(err)
	}
	before := waitJournal(ctx, t, cl.journal, 3)
	if err := cl.kill(); err != nil {
		t.Fatal(err)
	}
	before = max(before, waitJournal(ctx, t, cl.journal, 0))
	if err := cl.start(ctx); err != nil {
		t.Fatal(err)
	}
	// Five seconds is a third of the default lease: a host that waits for
	// the lease makes no progress in it; one that claims at once makes
	// dozens of supersteps.
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) && journalLen(t, cl.journal) <= before {
		sleep(ctx, 20*time.Millisecond)
	}
	if after := journalLen(t, cl.journal); after <= before {
		t.Errorf("response %s: no executor ran within 5s of the restart (journal stays at %d entries): recovery waits for the killed process's lease instead of claiming the run at once", resp.ID, before)
	}
	if err := cl.stop(30 * time.Second); err != nil {
		t.Error(err)
	}
}

// journalLen returns the number of entries in the journal (0 before it
// exists).
func journalLen(t *testing.T, path string) int {
	entries, err := verify.ReadJournal(path)
	if err != nil {
		return 0
	}
	return len(entries)
}

// waitJournal waits until the journal holds at least n entries and returns
// its length.
func waitJournal(ctx context.Context, t *testing.T, path string, n int) int {
	for {
		if l := journalLen(t, path); l >= n {
			return l
		}
		if ctx.Err() != nil {
			t.Fatalf("journal %s never reached %d entries", path, n)
		}
		sleep(ctx, 10*time.Millisecond)
	}
}
