package workflow

import "testing"

// MustSplit is SplitParts for tests.
func MustSplit(t testing.TB, blob []byte) []Part {
	t.Helper()
	parts, err := SplitParts(blob)
	if err != nil {
		t.Fatal(err)
	}
	return parts
}

// DropEncodingCache forgets the cached encodings of shared-state values, so
// the next Checkpoint encodes everything (for benchmarks).
func (r *Run) DropEncodingCache() { clear(r.st.enc) }

// CheckpointState is checkpointState for tests.
var CheckpointState = checkpointState

// Span attribute keys, for the tracing tests.
var (
	AttrSuperstepNumber    = attrSuperstepNumber
	AttrSuperstepCommitted = attrSuperstepCommitted
	AttrExecutorAttempt    = attrExecutorAttempt
)
