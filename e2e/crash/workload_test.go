package crash

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/openai/openai-go/v3"

	"github.com/superstep/superstep/internal/testkit/resumeclient"
	"github.com/superstep/superstep/verify"
)

// workload is one request: a creating client that streams it from the
// start, and a second reader that joins later.
type workload struct {
	cfg     config
	delayMS int
	resumeclient.Pair
	// cancelDelay is when a cancel is sent after the id is known (cancel
	// configs); cancelStatus is the status its reply showed.
	cancelDelay  time.Duration
	cancelStatus string
	err          error
	// tag names the workload in its input when cfg.tagged.
	tag string
}

// newWorkload draws a workload of configs from rng.
func newWorkload(cl *cluster, n int, rng *rand.Rand, configs []config) *workload {
	w := &workload{cfg: configs[rng.IntN(len(configs))], delayMS: 20 + rng.IntN(31), tag: fmt.Sprintf("w%04d", n)}
	w.Primary = newStream(cl, fmt.Sprintf("w%d-primary", n))
	w.Reader = newStream(cl, fmt.Sprintf("w%d-reader", n))
	w.Cursor = int64(rng.IntN(3)) - 2 // -2 is replaced by the primary's last seq
	w.cancelDelay = time.Duration(rng.IntN(800)) * time.Millisecond
	return w
}

// run drives the workload to its terminal event through any number of
// restarts, cancelling it meanwhile for a cancel config. A response whose
// creation was cut before its id reached the client is left to the final
// check, which reads every response in the database.
func (w *workload) run(ctx context.Context, cl *cluster) {
	var cancel func(context.Context, string) error
	if w.cfg.cancel {
		cancel = func(ctx context.Context, id string) (err error) {
			w.cancelStatus, err = cancelAfter(ctx, cl, id, w.cancelDelay)
			return err
		}
	}
	p := w.cfg.params(w.delayMS)
	if w.cfg.tagged {
		p.Input.OfString = openai.String(p.Input.OfString.Value + " [" + w.tag + "]")
	}
	w.err = w.Pair.Run(ctx, p, cancel)
}

// checkCancel requires a response whose cancel reply showed "cancelled" to
// end cancelled, whatever crashes came after the reply.
func (w *workload) checkCancel() error {
	if w.cancelStatus != "cancelled" || len(w.Primary.View.Events) == 0 {
		return nil
	}
	last := w.Primary.View.Events[len(w.Primary.View.Events)-1]
	out, err := verify.OutcomeOf(last.Data)
	if err != nil {
		return err
	}
	if last.Type != "response.cancelled" || out.Status != "cancelled" {
		return fmt.Errorf("crash: response %s: the cancel reply said cancelled, the stream ended with %s (%s)", w.Primary.ID, last.Type, out)
	}
	return nil
}
