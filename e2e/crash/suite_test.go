package crash

import (
	"context"
	"strings"
	"time"

	"github.com/superstep/superstep/verify"
)

// suite is what one crash test runs: its workloads, how many kills, how
// the server is started, when kills happen, and checks of its own.
type suite struct {
	configs []config
	kills   int
	// serveArgs are added to `superstep serve` (after the backend's).
	serveArgs []string
	// killAfterDelta makes each kill wait (a few seconds at most) for a
	// client to receive a text delta after the restart, so kills land while
	// tokens are streaming.
	killAfterDelta bool
	// jitterMS bounds the random wait before a kill (0 means 250).
	jitterMS int
	// killBudget is the time allowed per kill on top of the test's fixed
	// 90 s (0 means 1 s).
	killBudget time.Duration
	// check, when set, runs after the common checks on their input.
	check func(ch *chaos, in *verify.Input)
	// rotate takes the configs in turn instead of at random, so that
	// each gets its share of the kills.
	rotate bool
	// aimEvery and aim, when set, make every aimEvery-th kill land at a
	// moment aim reports (waited for, spawning, at most a second; then
	// the kill is made as the others are): a coverage the random moments
	// may miss on a loaded machine.
	aimEvery int
	aim      func() bool
}

// aimed reports whether kill number n (from 0) is to be aimed.
func (s *suite) aimed(n int) bool {
	return s.aim != nil && s.aimEvery > 0 && n%s.aimEvery == s.aimEvery-1
}

// jitter returns the bound of the random wait before a kill, in ms.
func (s *suite) jitter() int {
	if s.jitterMS > 0 {
		return s.jitterMS
	}
	return 250
}

// perKill returns the time allowed per kill.
func (s *suite) perKill() time.Duration {
	if s.killBudget > 0 {
		return s.killBudget
	}
	return time.Second
}

// waitDelta waits, spawning workloads, until a client received a text
// delta it had not when waitDelta began, or for 5 s.
func (ch *chaos) waitDelta(ctx context.Context) {
	n := ch.cl.deltas.Load()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline) && ch.cl.deltas.Load() == n && ctx.Err() == nil; {
		ch.spawn()
		sleep(ctx, time.Millisecond)
	}
}

// isToolCall reports whether a journal entry's executor is a tool call
// (demo.tools journals "tool:<name> <idempotency key> <call id>"): one
// line per attempt of the superstep that called it.
func isToolCall(executor string) bool { return strings.HasPrefix(executor, "tool:") }
