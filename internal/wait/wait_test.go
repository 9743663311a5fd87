package wait_test

import (
	"context"
	"testing"
	"time"

	"github.com/superstep/superstep/internal/wait"
)

func TestSleep(t *testing.T) {
	t.Parallel()
	live := context.Background()
	ended, cancel := context.WithCancel(live)
	cancel()

	start := time.Now()
	if !wait.Sleep(live, 20*time.Millisecond) {
		t.Fatal("live ctx: Sleep reported the ctx ended")
	}
	if d := time.Since(start); d < 20*time.Millisecond {
		t.Fatalf("Sleep returned after %v, want at least 20ms", d)
	}
	if wait.Sleep(ended, time.Hour) {
		t.Fatal("ended ctx: Sleep reported d elapsed")
	}
	if !wait.Sleep(live, 0) || !wait.Sleep(live, -time.Second) {
		t.Fatal("d <= 0 on a live ctx: want true")
	}
	if wait.Sleep(ended, 0) {
		t.Fatal("d = 0 on an ended ctx: want false")
	}

	ctx, cancelLater := context.WithCancel(live)
	time.AfterFunc(10*time.Millisecond, cancelLater)
	start = time.Now()
	if wait.Sleep(ctx, time.Hour) {
		t.Fatal("ctx cancelled during the wait: Sleep reported d elapsed")
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("Sleep returned %v after the cancel", d)
	}
}
