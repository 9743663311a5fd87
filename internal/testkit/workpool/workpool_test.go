package workpool_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/superstep/superstep/internal/testkit/workpool"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// item is a workload that runs until released or cancelled.
type item struct {
	i        int
	release  chan struct{}
	mu       sync.Mutex
	canceled bool
}

func runItem(ctx context.Context, it *item) {
	select {
	case <-it.release:
	case <-ctx.Done():
		it.mu.Lock()
		it.canceled = true
		it.mu.Unlock()
	}
}

// Fill keeps n running and numbers them after what was recorded; Wait
// returns once they all returned.
func TestPool_FillWait(t *testing.T) {
	p := workpool.New(context.Background(), runItem)
	defer p.Stop()
	ref := &item{i: -1}
	p.Add(ref)
	var made []*item
	next := func(i int) *item {
		it := &item{i: i, release: make(chan struct{})}
		made = append(made, it)
		return it
	}
	p.Fill(3, next)
	if len(made) != 3 || made[0].i != 1 || p.Running() > 3 {
		t.Fatalf("made %d, first index %d, %d running", len(made), made[0].i, p.Running())
	}
	close(made[0].release)
	deadline := time.Now().Add(30 * time.Second)
	for p.Running() > 2 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	p.Fill(3, next)
	if len(made) != 4 || made[3].i != 4 {
		t.Fatalf("after one returned: made %d (last index %d), want a fourth numbered 4", len(made), made[len(made)-1].i)
	}
	for _, it := range made[1:] {
		close(it.release)
	}
	if !p.Wait(30 * time.Second) {
		t.Fatal("Wait timed out with every workload released")
	}
	all := p.All()
	if len(all) != 5 || all[0] != ref || all[4] != made[3] {
		t.Fatalf("All: %d workloads", len(all))
	}
	for _, it := range made {
		if it.canceled {
			t.Errorf("workload %d cancelled", it.i)
		}
	}
}

// Wait cancels workloads that outlast its bound and reports it.
func TestPool_WaitCancels(t *testing.T) {
	p := workpool.New(context.Background(), runItem)
	defer p.Stop()
	var it *item
	p.Fill(1, func(i int) *item {
		it = &item{i: i, release: make(chan struct{})}
		return it
	})
	if p.Wait(10 * time.Millisecond) {
		t.Fatal("Wait reported a hanging workload as done")
	}
	it.mu.Lock()
	defer it.mu.Unlock()
	if !it.canceled || p.Running() != 0 {
		t.Fatalf("cancelled %v, %d running", it.canceled, p.Running())
	}
}
