package host

import (
	"testing"
	"time"
)

// testSignal lets tests wait for something the host did instead of
// sleeping. Its zero value does nothing, so production code signals freely.
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

// WaitOrTimeout returns the next recorded value or fails the test.
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

// testSignals are the host's test signals.
type testSignals struct {
	committed testSignal[int64]    // a commit succeeded (its step)
	leaseLost testSignal[string]   // a run stopped because it was fenced (run ID)
	runExited testSignal[string]   // a run goroutine exited (run ID)
	claimed   testSignal[struct{}] // a claim round (claimAndResume) ended
}
