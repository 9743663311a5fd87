package examples

import (
	"fmt"
	"os"
	"time"

	"github.com/superstep/superstep/workflow"
)

// JournalEnv names the environment variable that enables the journal.
const JournalEnv = "SUPERSTEP_DEMO_JOURNAL"

// Options configure the demo workflows; nil means the defaults.
type Options struct {
	// Journal is the journal file; "" reads JournalEnv at each invocation
	// ("" there too: no journal).
	Journal string
}

// invocation wraps the work of every demo executor invocation: the
// step_delay_ms sleep before the work, the journal line after it.
type invocation struct {
	opts Options
}

// run sleeps step_delay_ms, calls work (if any), and journals the
// invocation when work succeeded.
func (iv invocation) run(c *workflow.Context, work func() error) error {
	inv := c.Invocation()
	if d, _ := workflow.Metadata(inv, "step_delay_ms", 0); d > 0 {
		t := time.NewTimer(time.Duration(d) * time.Millisecond)
		select {
		case <-t.C:
		case <-c.Context().Done():
			t.Stop()
			return c.Context().Err()
		}
	}
	if work != nil {
		if err := work(); err != nil {
			return err
		}
	}
	return iv.journal(inv, c)
}

// journal appends "<response_id> <superstep> <executor_id>" and fsyncs
// (the run id when the run works for no response).
func (iv invocation) journal(inv workflow.Invocation, c *workflow.Context) error {
	id := inv.ID
	if id == "" {
		id = c.RunID()
	}
	return iv.appendJournal(fmt.Sprintf("%s %d %s\n", id, c.Step(), c.ExecutorID()))
}

// appendJournal appends line to the journal (when there is one) and fsyncs.
func (iv invocation) appendJournal(line string) error {
	path := iv.opts.Journal
	if path == "" {
		path = os.Getenv(JournalEnv)
	}
	if path == "" {
		return nil
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("examples: journal: %w", err)
	}
	_, err = f.WriteString(line)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("examples: journal: %w", err)
	}
	return nil
}
