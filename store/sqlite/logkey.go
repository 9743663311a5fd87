package sqlite

import "fmt"

// The events and checkpoints tables are keyed by one integer k: the owner's
// number (responses.num for events, runs.num for checkpoints) shifted left
// by keyShift, or'ed with the event's seq or the checkpoint's step
// (migration 001 says why).
const (
	keyShift = 32
	// lowMax is the largest seq or step a key holds.
	lowMax = 1<<keyShift - 1
)

// logKey returns the key of sequence number or step n of owner number num
// (n = -1 gives the bound just below the owner's first key).
func logKey(num, n int64) int64 { return num<<keyShift + n }

// runKeyLo and runKeyHi are SQL bounds of the checkpoint keys of the run
// whose ID is parameter ?1.
const (
	runKeyLo = "((SELECT num FROM runs WHERE id = ?1) << 32)"
	runKeyHi = "((SELECT num FROM runs WHERE id = ?1) << 32 | 4294967295)"
)

// checkLow reports an error when n does not fit the low bits of a key.
func checkLow(op, what string, n int64) error {
	if n < 0 || n > lowMax {
		return fmt.Errorf("sqlite: %s: %s %d out of range [0, %d]", op, what, n, int64(lowMax))
	}
	return nil
}
