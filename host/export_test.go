package host

import (
	"testing"
	"time"
)

// WaitOrTimeout returns the next value s recorded or fails the test. It is
// here, not in testsignal.go, so that package host does not import testing.
func (s *testSignal[T]) WaitOrTimeout(tb testing.TB) T {
	tb.Helper()
	select {
	case v := <-s.ch:
		return v
	case <-time.After(10 * time.Second):
		tb.Fatal("host: test signal not received within 10s")
	}
	var zero T
	return zero
}

// InitTestSignals arms the host's test signals; call it before Start.
func (h *Host) InitTestSignals() {
	h.test.committed.Init()
	h.test.leaseLost.Init()
	h.test.runExited.Init()
	h.test.claimed.Init()
	h.test.journalQueued.Init()
}

// JournalQueued receives a value each time a journal entry is queued to
// ride with live frames (batchJournal), for store wrappers that gate
// appends on it.
func (h *Host) JournalQueued() <-chan int64 { return h.test.journalQueued.ch }

// WaitCommitted waits for the next successful commit and returns its step.
func (h *Host) WaitCommitted(tb testing.TB) int64 { return h.test.committed.WaitOrTimeout(tb) }

// WaitLeaseLost waits for a run to stop because it was fenced.
func (h *Host) WaitLeaseLost(tb testing.TB) string { return h.test.leaseLost.WaitOrTimeout(tb) }

// WaitRunExited waits for a run goroutine to exit.
func (h *Host) WaitRunExited(tb testing.TB) string { return h.test.runExited.WaitOrTimeout(tb) }

// WaitClaimRound waits for the end of a claim round (a claim of the runs
// that need a host and their resumes).
func (h *Host) WaitClaimRound(tb testing.TB) { h.test.claimed.WaitOrTimeout(tb) }

// HostID returns the host's lease owner name.
func (h *Host) HostID() string { return h.cfg.HostID }

// ToStoreParts and ToWorkflowParts are the checkpoint parts' conversions
// between the workflow and the store (chunks.go).
var (
	ToStoreParts    = toStoreParts
	ToWorkflowParts = toWorkflowParts
)

// ChunkFrom is the size from which a state or executor part is chunked.
const ChunkFrom = chunkFrom
