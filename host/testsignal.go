package host

// testSignal lets tests wait for something the host did instead of
// sleeping (WaitOrTimeout, in export_test.go). Its zero value does nothing,
// so production code signals freely. This file must not import testing:
// the superstep command links package host.
type testSignal[T any] struct {
	ch chan T
}

// Init arms the signal; call it before the host starts.
func (s *testSignal[T]) Init() { s.ch = make(chan T, 1000) }

// Signal records v if the signal is armed; it never blocks.
func (s *testSignal[T]) Signal(v T) {
	if s.ch == nil {
		return
	}
	select {
	case s.ch <- v:
	default:
	}
}

// testSignals are the host's test signals.
type testSignals struct {
	committed testSignal[int64]    // a commit succeeded (its step)
	leaseLost testSignal[string]   // a run stopped because it was fenced (run ID)
	runExited testSignal[string]   // a run goroutine exited (run ID)
	claimed   testSignal[struct{}] // a claim round (claimAndResume) ended
	// journalQueued: a journal entry was queued to ride with live frames
	// (batchJournal; the entry's step).
	journalQueued testSignal[int64]
}
