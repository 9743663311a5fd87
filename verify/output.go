package verify

// checkOutputKept checks that every output item shown to clients since the
// last (re)start of generation is in the final response at the same index
// with the same id and content. A reset response.in_progress (live mode
// recovery) withdraws the items shown before it, so only items announced
// after the last response.in_progress count.
func checkOutputKept(rep *Report, id string, lv *logView) {
	if lv.terminal == nil || lv.terminal.Response == nil {
		return
	}
	final := lv.terminal.Response.Output
	from := 0
	for i, ev := range lv.events {
		if ev != nil && ev.Type == "response.in_progress" {
			from = i
		}
	}
	for seq := from; seq < len(lv.events); seq++ {
		ev := lv.events[seq]
		if ev == nil || ev.Type != "response.output_item.done" || ev.OutputIndex == nil || ev.Item == nil {
			continue
		}
		idx := *ev.OutputIndex
		if idx < 0 || idx >= len(final) {
			rep.add(InvOutputKept, id, "", "item %s (%q) shown at seq %d with output_index %d is missing from the final output of %d items",
				ev.Item.ID, ev.Item.text(), seq, idx, len(final))
			continue
		}
		got := &final[idx]
		if got.ID != ev.Item.ID || got.text() != ev.Item.text() {
			rep.add(InvOutputKept, id, "", "item shown at seq %d as output %d is %s %q, the final output has %s %q",
				seq, idx, ev.Item.ID, ev.Item.text(), got.ID, got.text())
		}
	}
}

// checkRecord checks the stored response record against the log.
func checkRecord(rep *Report, in *ResponseInput, lv *logView) {
	r := in.Record
	if r.ID != in.ID {
		rep.add(InvRecord, in.ID, "", "the record is response %s", r.ID)
	}
	if r.NextSeq != int64(len(in.Log)) {
		rep.add(InvRecord, in.ID, "", "record NextSeq is %d, the log has %d events", r.NextSeq, len(in.Log))
	}
	if lv.terminal == nil || lv.terminal.Response == nil {
		if r.Status.Terminal() {
			rep.add(InvRecord, in.ID, "", "record status is %s but the log has no terminal event carrying a response", r.Status)
		}
		return
	}
	want := lv.terminal.Response.outcome()
	if string(r.Status) != want.Status {
		rep.add(InvRecord, in.ID, "", "record status is %s, the terminal event says %s", r.Status, want.Status)
	}
	got, err := SnapshotOutcome(r.Snapshot)
	if err != nil {
		rep.add(InvRecord, in.ID, "", "record snapshot: %v", err)
		return
	}
	if !got.Equal(want) {
		rep.add(InvRecord, in.ID, "", "record snapshot is %s, the terminal event carries %s", got, want)
	}
}

// checkReference checks the final outcome against a crash-free run's.
func checkReference(rep *Report, in *ResponseInput, lv *logView) {
	if lv.terminal == nil || lv.terminal.Response == nil {
		rep.add(InvReference, in.ID, "", "no terminal event with a response to compare with the reference %s", in.Reference)
		return
	}
	if got := lv.terminal.Response.outcome(); !got.Equal(*in.Reference) {
		rep.add(InvReference, in.ID, "", "final outcome is %s, the reference run's is %s", got, in.Reference)
	}
}
