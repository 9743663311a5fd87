//go:build linux || darwin

package sqlite_test

import (
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/superstep/superstep/store/sqlite"
)

// TestReopenWhileForking: a store closed and opened again while another
// goroutine of the process starts child processes opens. A child holds a
// copy of the process's descriptors between its fork and its exec; a
// lock file closed in that window stayed locked by the copy, and the
// reopen failed with ErrLocked (the storetest Fault loop, reopening beside
// the Crash case's children, failed so in CI). Close waits for forks in
// flight and Open retries a lock held for a moment (lockPatience).
func TestReopenWhileForking(t *testing.T) {
	true_, err := exec.LookPath("true")
	if err != nil {
		t.Fatalf("no true(1) to fork: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	for range 2 {
		wg.Go(func() {
			for ctx.Err() == nil {
				_ = exec.Command(true_).Run()
			}
		})
	}
	path := filepath.Join(t.TempDir(), "s.db")
	deadline := time.Now().Add(2 * time.Second)
	n := 0
	for ; time.Now().Before(deadline); n++ {
		s, err := sqlite.Open(ctx, path, nil)
		if errors.Is(err, sqlite.ErrLocked) {
			t.Fatalf("open %d, after %d closes while forking: %v", n+1, n, err)
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%d opens and closes while forking", n)
}
