package verify

// logView is the parsed log of one response.
type logView struct {
	events   []*wireEvent // parsed payloads; nil where unparseable
	terminal *wireEvent   // the last event when it is terminal and parsed
}

// checkLog checks sequence numbers, the created and terminal events, the
// payloads and the commit steps of one response's log.
func checkLog(rep *Report, in *ResponseInput) *logView {
	lv := &logView{events: make([]*wireEvent, len(in.Log))}
	if len(in.Log) == 0 {
		rep.add(InvLogSeq, in.ID, "", "the log is empty")
		return lv
	}
	checkSeqs(rep, in)
	checkLifecycle(rep, in)
	lastStep, lastStepSeq := int64(-1), int64(-1)
	for i := range in.Log {
		e := &in.Log[i]
		lv.events[i] = checkPayload(rep, in.ID, e.Seq, e.Type, e.Payload)
		if e.Step >= 0 {
			if e.Step < lastStep {
				rep.add(InvLogSteps, in.ID, "", "event seq %d was written by step %d after seq %d by step %d",
					e.Seq, e.Step, lastStepSeq, lastStep)
			}
			lastStep, lastStepSeq = e.Step, e.Seq
		}
	}
	last := lv.events[len(lv.events)-1]
	if last != nil && IsTerminal(in.Log[len(in.Log)-1].Type) {
		lv.terminal = last
	}
	return lv
}

// checkSeqs checks that entry i has sequence number i and belongs to the
// response. Only the first wrong sequence number is reported: after a gap
// every later entry is off too.
func checkSeqs(rep *Report, in *ResponseInput) {
	seqReported := false
	for i := range in.Log {
		e := &in.Log[i]
		if e.Seq != int64(i) && !seqReported {
			rep.add(InvLogSeq, in.ID, "", "log entry %d has seq %d, want %d (gap, duplicate or reorder)", i, e.Seq, i)
			seqReported = true
		}
		if e.ResponseID != "" && e.ResponseID != in.ID {
			rep.add(InvLogSeq, in.ID, "", "log entry %d belongs to response %s", i, e.ResponseID)
		}
	}
}

// checkLifecycle checks that response.created is the first event and the
// only one, and that exactly one terminal event ends the log.
func checkLifecycle(rep *Report, in *ResponseInput) {
	var terminals []int64
	for i := range in.Log {
		e := &in.Log[i]
		if e.Type == "response.created" && i != 0 {
			rep.add(InvCreated, in.ID, "", "another response.created at seq %d", e.Seq)
		}
		if IsTerminal(e.Type) {
			terminals = append(terminals, e.Seq)
		}
	}
	if t := in.Log[0].Type; t != "response.created" {
		rep.add(InvCreated, in.ID, "", "the first event is %s, want response.created", t)
	}
	last := &in.Log[len(in.Log)-1]
	switch {
	case len(terminals) == 0:
		rep.add(InvTerminal, in.ID, "", "no terminal event; the log ends with %s at seq %d", last.Type, last.Seq)
	case len(terminals) > 1:
		rep.add(InvTerminal, in.ID, "", "%d terminal events, at seqs %v", len(terminals), terminals)
	case !IsTerminal(last.Type):
		rep.add(InvTerminal, in.ID, "", "the terminal event at seq %d is followed by %s at seq %d",
			terminals[0], last.Type, last.Seq)
	}
}

// checkPayload parses one payload and checks its type, sequence number and
// response id against the log entry; it returns nil when unparseable.
func checkPayload(rep *Report, id string, seq int64, typ string, payload []byte) *wireEvent {
	ev, err := parseEvent(payload)
	if err != nil {
		rep.add(InvPayload, id, "", "seq %d (%s): %v", seq, typ, err)
		return nil
	}
	if ev.Type != typ {
		rep.add(InvPayload, id, "", "seq %d: payload type %q, log type %q", seq, ev.Type, typ)
	}
	switch {
	case ev.SequenceNumber == nil:
		rep.add(InvPayload, id, "", "seq %d (%s): payload has no sequence_number", seq, typ)
	case *ev.SequenceNumber != seq:
		rep.add(InvPayload, id, "", "seq %d (%s): payload sequence_number is %d", seq, typ, *ev.SequenceNumber)
	}
	if ev.Response != nil && ev.Response.ID != "" && ev.Response.ID != id {
		rep.add(InvPayload, id, "", "seq %d (%s): payload is about response %s", seq, typ, ev.Response.ID)
	}
	return ev
}
