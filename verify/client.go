package verify

import "fmt"

// checkClient checks that a client received exactly the log from StartAt:
// each event equal to the log's at its sequence number, none skipped,
// repeated or out of order, and, unless Partial, up to the last event. It
// stops at the first divergence, since everything after it is off too.
func checkClient(rep *Report, in *ResponseInput, c *ClientView) {
	rep.ClientEvents += len(c.Events)
	if c.StartAt < 0 {
		rep.add(InvClientView, in.ID, c.Name, "StartAt is %d; want 0 or more", c.StartAt)
		return
	}
	checkResumes(rep, in.ID, c)
	want := c.StartAt
	for _, ev := range c.Events {
		switch {
		case ev.Seq < want:
			rep.add(InvClientView, in.ID, c.Name, "received seq %d again after seq %d (duplicate or reorder)%s",
				ev.Seq, want-1, resumeNote(c, want-1))
			return
		case ev.Seq > want:
			rep.add(InvClientView, in.ID, c.Name, "received seq %d after seq %d: missed %d..%d%s",
				ev.Seq, want-1, want, ev.Seq-1, resumeNote(c, want-1))
			return
		case want >= int64(len(in.Log)):
			rep.add(InvClientView, in.ID, c.Name, "received seq %d (%s), beyond the log's %d events", ev.Seq, ev.Type, len(in.Log))
			return
		}
		le := &in.Log[want]
		if ev.Type != le.Type || !jsonEqual(ev.Data, le.Payload) {
			rep.add(InvClientView, in.ID, c.Name, "seq %d differs from the log: received %s %s, logged %s %s",
				ev.Seq, ev.Type, ev.Data, le.Type, le.Payload)
			return
		}
		want++
	}
	if !c.Partial && want < int64(len(in.Log)) {
		last := &in.Log[len(in.Log)-1]
		rep.add(InvClientView, in.ID, c.Name, "stopped before seq %d; the log goes on to seq %d (%s)", want, last.Seq, last.Type)
	}
}

// checkResumes checks that every resume cursor is a sequence number the
// client could have seen: not below StartAt-1, not above the highest it
// received, and never going back.
func checkResumes(rep *Report, id string, c *ClientView) {
	top := c.StartAt - 1
	for _, ev := range c.Events {
		top = max(top, ev.Seq)
	}
	prev := c.StartAt - 1
	for _, r := range c.ResumedAt {
		if r < prev || r > top {
			rep.add(InvClientView, id, c.Name, "resumed after seq %d, outside %d..%d (its previous cursor .. the last it received)", r, prev, top)
		}
		prev = max(prev, r)
	}
}

// resumeNote says which resume preceded seq, for messages.
func resumeNote(c *ClientView, seq int64) string {
	note := ""
	for _, r := range c.ResumedAt {
		if r <= seq {
			note = fmt.Sprintf(" (after resuming with starting_after=%d)", r)
		}
	}
	return note
}
