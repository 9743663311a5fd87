package crash

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/superstep/superstep/verify"
)

// workload is one request: a creating client that streams it from the
// start, and a second reader that joins later.
type workload struct {
	cfg     config
	delayMS int
	primary *stream
	reader  *stream
	cursor  int64 // the reader's first starting_after; -1 replays from 0
	// cancelDelay is when a cancel is sent after the id is known (cancel
	// configs); cancelStatus is the status its reply showed.
	cancelDelay  time.Duration
	cancelStatus string
	err          error
}

// newWorkload draws a workload of configs from rng.
func newWorkload(cl *cluster, n int, rng *rand.Rand, configs []config) *workload {
	w := &workload{cfg: configs[rng.IntN(len(configs))], delayMS: 20 + rng.IntN(31)}
	w.primary = &stream{cl: cl, name: fmt.Sprintf("w%d-primary", n)}
	w.reader = &stream{cl: cl, name: fmt.Sprintf("w%d-reader", n)}
	w.cursor = int64(rng.IntN(3)) - 2 // -2 is replaced by the primary's last seq
	w.cancelDelay = time.Duration(rng.IntN(800)) * time.Millisecond
	return w
}

// run drives the workload to its terminal event through any number of
// restarts. A response whose creation was cut before its id reached the
// client is left to the final check, which reads every response in the
// database.
func (w *workload) run(ctx context.Context) {
	if w.err = w.primary.create(ctx, w.cfg, w.delayMS); w.err != nil || w.primary.id == "" {
		return
	}
	w.reader.id = w.primary.id
	if w.cursor == -2 || w.cursor > w.primary.last() {
		w.cursor = w.primary.last()
	}
	if w.primary.terminal && w.cursor == w.primary.last() {
		// Resuming after the terminal event is checked apart
		// (checkResumeAtEnd): it cannot wait for anything.
		w.cursor--
	}
	w.reader.view.StartAt = w.cursor + 1
	var wg sync.WaitGroup
	var readerErr, cancelErr error
	wg.Go(func() { readerErr = w.reader.follow(ctx) })
	if w.cfg.cancel {
		wg.Go(func() { w.cancelStatus, cancelErr = cancelAfter(ctx, w.primary.cl, w.primary.id, w.cancelDelay) })
	}
	w.err = w.primary.follow(ctx)
	wg.Wait()
	w.err = errors.Join(w.err, readerErr, cancelErr)
}

// checkCancel requires a response whose cancel reply showed "cancelled" to
// end cancelled, whatever crashes came after the reply.
func (w *workload) checkCancel() error {
	if w.cancelStatus != "cancelled" || len(w.primary.view.Events) == 0 {
		return nil
	}
	last := w.primary.view.Events[len(w.primary.view.Events)-1]
	out, err := verify.OutcomeOf(last.Data)
	if err != nil {
		return err
	}
	if last.Type != "response.cancelled" || out.Status != "cancelled" {
		return fmt.Errorf("crash: response %s: the cancel reply said cancelled, the stream ended with %s (%s)", w.primary.id, last.Type, out)
	}
	return nil
}

// views returns the client views of the workload's response.
func (w *workload) views() []verify.ClientView {
	p, r := w.primary.view, w.reader.view
	p.Name, r.Name = w.primary.name, w.reader.name
	return []verify.ClientView{p, r}
}
