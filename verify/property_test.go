package verify

import (
	"fmt"
	"testing"

	"pgregory.net/rapid"
)

// genClient draws a client that starts somewhere in log and reconnects at
// random points, resuming after the last event it saw.
func genClient(t *rapid.T, all []ReceivedEvent, name string) ClientView {
	n := len(all)
	c := ClientView{Name: name, StartAt: int64(rapid.IntRange(0, n).Draw(t, name+"-start"))}
	for i := int(c.StartAt); i < n; i++ {
		if rapid.IntRange(0, 3).Draw(t, name+"-drop") == 0 {
			c.ResumedAt = append(c.ResumedAt, int64(i)-1)
		}
		c.Events = append(c.Events, all[i])
	}
	return c
}

// TestCheck_Property_ValidThenBroken draws valid runs and clients (no
// violation), then breaks one client's view and requires client-view.
func TestCheck_Property_ValidThenBroken(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		outs := rapid.SliceOfN(rapid.StringMatching(`[a-z]{1,5}`), 0, 5).Draw(t, "outputs")
		status := rapid.SampledFrom([]string{"completed", "failed", "cancelled", "incomplete"}).Draw(t, "status")
		r := &run{id: "resp_p", outputs: outs, status: status}
		in := r.input()
		all := received(in.Log, 0, len(in.Log))
		for i := range rapid.IntRange(1, 3).Draw(t, "clients") {
			in.Clients = append(in.Clients, genClient(t, all, fmt.Sprintf("c%d", i)))
		}
		if rep := Check(&Input{Responses: []ResponseInput{in}}); rep.Err() != nil {
			t.Fatalf("valid run reported: %v", rep.Err())
		}
		c := &in.Clients[0]
		c.StartAt = 0
		c.Events = append([]ReceivedEvent(nil), all...)
		c.ResumedAt = nil
		i := rapid.IntRange(0, len(c.Events)-1).Draw(t, "at")
		switch rapid.IntRange(0, 3).Draw(t, "break") {
		case 0: // lose one event
			c.Events = append(c.Events[:i:i], c.Events[i+1:]...)
		case 1: // repeat one event
			c.Events = append(c.Events[:i+1:i+1], c.Events[i:]...)
		case 2: // alter one event's data
			c.Events[i].Data = append([]byte(`{"x":1,`), c.Events[i].Data[1:]...)
		case 3: // swap two neighbours, or stop one early
			if i+1 < len(c.Events) {
				c.Events[i], c.Events[i+1] = c.Events[i+1], c.Events[i]
			} else {
				c.Events = c.Events[:i]
			}
		}
		if rep := Check(&Input{Responses: []ResponseInput{in}}); !rep.Has(InvClientView) {
			t.Fatalf("broken view not reported: %v", rep)
		}
	})
}

// simulate runs a response of steps supersteps with the given executors per
// step, crashing at the drawn journal positions, the way a correct host
// behaves: a crash loses the step in flight (some of its executors may have
// journaled), and recovery re-runs it from the top.
func simulate(t *rapid.T, steps int) *Journal {
	j := &Journal{}
	committed := int64(0)
	for step := int64(1); step <= int64(steps); {
		execs := rapid.IntRange(1, 3).Draw(t, "execs")
		crashAfter := rapid.IntRange(-1, execs).Draw(t, "crash") // -1: no crash in this step
		for e := range execs {
			if e == crashAfter {
				break
			}
			j.Entries = append(j.Entries, JournalEntry{"resp_s", step, fmt.Sprintf("x%d", e)})
		}
		if crashAfter >= 0 && j.Crashes < 5 {
			// A crash either before (crashAfter < execs) or just after the commit.
			if crashAfter == execs {
				committed = step
				step++
			}
			j.Crashes++
			j.Marks = append(j.Marks, CrashMark{JournalLen: len(j.Entries), Committed: map[string]int64{"resp_s": committed}})
			continue
		}
		committed = step
		step++
	}
	return j
}

// TestCheck_Property_Journal draws crash schedules of a correct host (no
// violation), then re-runs a committed superstep after the last crash and
// requires committed-rerun.
func TestCheck_Property_Journal(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		j := simulate(t, rapid.IntRange(1, 6).Draw(t, "steps"))
		if rep := Check(&Input{Journal: j}); rep.Err() != nil {
			t.Fatalf("correct schedule reported: %v\n%v", rep.Err(), j)
		}
		withMarks := rapid.Bool().Draw(t, "marks")
		if !withMarks {
			j.Marks = nil
		}
		// Re-run step 1 (committed once step 2 started or a later crash saw it) at the end.
		last := j.Entries[len(j.Entries)-1]
		if last.Step < 2 {
			return
		}
		j.Crashes++
		if withMarks {
			j.Marks = append(j.Marks, CrashMark{JournalLen: len(j.Entries), Committed: map[string]int64{"resp_s": last.Step - 1}})
		}
		j.Entries = append(j.Entries, JournalEntry{"resp_s", 1, "x0"})
		if rep := Check(&Input{Journal: j}); !rep.Has(InvCommittedRerun) {
			t.Fatalf("re-run of committed step 1 not reported: %v", rep)
		}
	})
}
