package multihost

import (
	"bytes"
	"context"
	"os"
	"testing"

	"github.com/superstep/superstep/internal/testkit/verifytest"
	"github.com/superstep/superstep/store"
	"github.com/superstep/superstep/verify"
)

// journalLen returns the number of complete lines in the journal (0 before
// it exists). Other hosts append while it reads: a line being written is
// not counted.
func journalLen(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	return bytes.Count(b, []byte{'\n'})
}

// crashMark records a crash while the other hosts keep running. Each
// run's last committed step is read before the journal's length: an
// invocation journaled after that length started after the commits read,
// so one belonging to a superstep read as committed ran it again.
func crashMark(ctx context.Context, s store.Store, journal string) (verify.CrashMark, error) {
	m := verify.CrashMark{Committed: map[string]int64{}}
	err := verifytest.ForEachResponse(ctx, s, func(run *store.Run, r *store.Response) error {
		m.Committed[r.ID] = run.LastStep
		return nil
	})
	if err != nil {
		return m, err
	}
	m.JournalLen = journalLen(journal)
	return m, nil
}

// loadResponses adds every response in s to in, with the clients' views
// of it and its reference outcome (by metadata.workload, which every
// response must have), and returns each response's workload name.
// store.Check runs first.
func loadResponses(ctx context.Context, t *testing.T, s store.Store, in *verify.Input,
	clients map[string][]verify.ClientView, refs map[string]verify.Outcome) map[string]string {
	t.Helper()
	return verifytest.AddResponses(ctx, t, s, in, clients, refs, nil)
}
