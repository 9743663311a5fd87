package verify

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/superstep/superstep/store"
)

// requireExactly fails unless rep's violations are exactly of the invariants
// want (each at least once, no other).
func requireExactly(t *testing.T, rep *Report, want ...Invariant) {
	t.Helper()
	var got []Invariant
	for _, v := range rep.Violations {
		if !slices.Contains(got, v.Invariant) {
			got = append(got, v.Invariant)
		}
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("violated %v, want %v; report:\n%v", got, want, rep.Err())
	}
	if (rep.Err() == nil) != (len(want) == 0) {
		t.Fatalf("Err() = %v with %d wanted invariants", rep.Err(), len(want))
	}
	t.Logf("%v", rep.Err())
}

// logOnly checks just a log (no clients, record or reference).
func logOnly(id string, log []store.Event) *Report {
	return Check(&Input{Responses: []ResponseInput{{ID: id, Log: log}}})
}

func TestCheck_ValidRunHasNoViolations(t *testing.T) {
	t.Parallel()
	a := (&run{id: "resp_a", outputs: []string{"first-2", "second-2", "done"}}).input()
	b := (&run{id: "resp_b", status: "cancelled"}).input()
	// A client that joined late, one that resumed twice, one that stopped on purpose.
	a.Clients = append(a.Clients,
		ClientView{Name: "late", StartAt: 3, Events: received(a.Log, 3, len(a.Log))},
		ClientView{Name: "resumed", Events: received(a.Log, 0, len(a.Log)), ResumedAt: []int64{2, 2, 5}},
		ClientView{Name: "partial", Events: received(a.Log, 0, 2), Partial: true},
		ClientView{Name: "joined-at-end", StartAt: int64(len(a.Log))},
	)
	j := &Journal{Crashes: 1, Entries: []JournalEntry{
		{"resp_a", 1, "start"}, {"resp_a", 2, "w1"}, {"resp_a", 2, "w0"}, // crash in step 2 after w0
		{"resp_a", 2, "w0"}, {"resp_a", 2, "w1"}, {"resp_a", 3, "end"}, {"resp_b", 1, "start"},
	}}
	rep := Check(&Input{Responses: []ResponseInput{a, b}, Journal: j})
	requireExactly(t, rep)
	if rep.Responses != 2 || rep.Events != len(a.Log)+len(b.Log) || rep.JournalEntries != 7 {
		t.Fatalf("counts: %v", rep)
	}
	if !strings.Contains(rep.String(), "0 violations") {
		t.Fatalf("String() = %q", rep.String())
	}
}

func TestCheck_Log(t *testing.T) {
	t.Parallel()
	base := func() []store.Event { return (&run{id: "r", outputs: []string{"x", "y"}}).log() }
	for _, tc := range []struct {
		name string
		edit func(log []store.Event) []store.Event
		want []Invariant
	}{
		{"Empty", func([]store.Event) []store.Event { return nil }, []Invariant{InvLogSeq}},
		{"Gap", func(l []store.Event) []store.Event { return slices.Delete(l, 3, 4) }, []Invariant{InvLogSeq}},
		{"DuplicateSeq", func(l []store.Event) []store.Event { return slices.Insert(l, 3, l[2]) }, []Invariant{InvLogSeq}},
		{"Reorder", func(l []store.Event) []store.Event { l[2], l[3] = l[3], l[2]; return l }, []Invariant{InvLogSeq}},
		{"OtherResponsesEntry", func(l []store.Event) []store.Event { l[2].ResponseID = "other"; return l }, []Invariant{InvLogSeq}},
		{"NoCreated", func(l []store.Event) []store.Event {
			l[0].Type = "response.queued"
			setPayload(&l[0], func(m map[string]any) { m["type"] = "response.queued" })
			return l
		}, []Invariant{InvCreated}},
		{"SecondCreated", func(l []store.Event) []store.Event {
			l[1].Type = "response.created"
			setPayload(&l[1], func(m map[string]any) { m["type"] = "response.created" })
			return l
		}, []Invariant{InvCreated}},
		{"NoTerminal", func(l []store.Event) []store.Event { return l[:len(l)-1] }, []Invariant{InvTerminal}},
		{"TwoTerminals", func(l []store.Event) []store.Event {
			e := l[len(l)-1]
			e.Seq++
			setPayload(&e, func(m map[string]any) { m["sequence_number"] = e.Seq })
			return append(l, e)
		}, []Invariant{InvTerminal}},
		{"TerminalNotLast", func(l []store.Event) []store.Event {
			e := l[len(l)-2] // an output_item.done after the terminal event
			e.Seq, e.Step = int64(len(l)), l[len(l)-1].Step
			setPayload(&e, func(m map[string]any) { m["sequence_number"] = e.Seq })
			return append(l, e)
		}, []Invariant{InvTerminal}},
		{"PayloadTypeDiffers", func(l []store.Event) []store.Event { l[2].Type = "response.output_item.done"; return l }, []Invariant{InvPayload}},
		{"PayloadSeqDiffers", func(l []store.Event) []store.Event {
			setPayload(&l[2], func(m map[string]any) { m["sequence_number"] = 7 })
			return l
		}, []Invariant{InvPayload}},
		{"PayloadSeqMissing", func(l []store.Event) []store.Event {
			setPayload(&l[2], func(m map[string]any) { delete(m, "sequence_number") })
			return l
		}, []Invariant{InvPayload}},
		{"PayloadNotJSON", func(l []store.Event) []store.Event { l[2].Payload = []byte("{oops"); return l }, []Invariant{InvPayload}},
		{"PayloadOtherResponse", func(l []store.Event) []store.Event {
			setPayload(&l[1], func(m map[string]any) { m["response"].(map[string]any)["id"] = "resp_other" })
			return l
		}, []Invariant{InvPayload}},
		{"StepGoesBack", func(l []store.Event) []store.Event { l[4].Step = 0; return l }, []Invariant{InvLogSteps}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			requireExactly(t, logOnly("r", tc.edit(base())), tc.want...)
		})
	}
}

func TestCheck_LiveAppendedStepsAreIgnored(t *testing.T) {
	t.Parallel()
	l := (&run{id: "r", outputs: []string{"x"}}).log()
	l[2].Step = -1 // appended by EventAppend before its step committed
	requireExactly(t, logOnly("r", l))
}

func TestCheck_Client(t *testing.T) {
	t.Parallel()
	r := &run{id: "r", outputs: []string{"a", "b", "c"}}
	log := r.log()
	n := len(log)
	for _, tc := range []struct {
		name string
		view ClientView
		want []Invariant
	}{
		{"Gap", ClientView{Events: slices.Delete(received(log, 0, n), 4, 5)}, []Invariant{InvClientView}},
		{"GapAtStart", ClientView{StartAt: 2, Events: received(log, 3, n)}, []Invariant{InvClientView}},
		{"Duplicate", ClientView{Events: slices.Insert(received(log, 0, n), 4, received(log, 3, 4)...), ResumedAt: []int64{3}}, []Invariant{InvClientView}},
		{"Reorder", ClientView{Events: func() []ReceivedEvent {
			ev := received(log, 0, n)
			ev[3], ev[4] = ev[4], ev[3]
			return ev
		}()}, []Invariant{InvClientView}},
		{"DataDiffers", ClientView{Events: func() []ReceivedEvent {
			ev := received(log, 0, n)
			ev[3].Data = []byte(`{"type":"response.output_item.done","sequence_number":3}`)
			return ev
		}()}, []Invariant{InvClientView}},
		{"TypeDiffers", ClientView{Events: func() []ReceivedEvent {
			ev := received(log, 0, n)
			ev[3].Type = "response.output_item.added"
			return ev
		}()}, []Invariant{InvClientView}},
		{"StoppedEarly", ClientView{Events: received(log, 0, n-1)}, []Invariant{InvClientView}},
		{"BeyondLog", ClientView{Events: append(received(log, 0, n), ReceivedEvent{Seq: int64(n), Type: "response.completed"})}, []Invariant{InvClientView}},
		{"NegativeStart", ClientView{StartAt: -1, Events: received(log, 0, n)}, []Invariant{InvClientView}},
		{"ResumeBeyondReceived", ClientView{Events: received(log, 0, n), ResumedAt: []int64{int64(n)}}, []Invariant{InvClientView}},
		{"ResumeGoesBack", ClientView{Events: received(log, 0, n), ResumedAt: []int64{4, 2}}, []Invariant{InvClientView}},
		{"WhitespaceOnlyDiffers", ClientView{Events: func() []ReceivedEvent {
			ev := received(log, 0, n)
			ev[1].Data = append([]byte(" "), ev[1].Data...)
			return ev
		}()}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.view.Name = tc.name
			in := ResponseInput{ID: "r", Log: log, Clients: []ClientView{tc.view}}
			requireExactly(t, Check(&Input{Responses: []ResponseInput{in}}), tc.want...)
		})
	}
}

func TestCheck_ClientMessageNamesResume(t *testing.T) {
	t.Parallel()
	log := (&run{id: "r", outputs: []string{"a"}}).log()
	ev := received(log, 0, len(log))
	in := ResponseInput{ID: "r", Log: log, Clients: []ClientView{{Name: "c1", Events: slices.Delete(ev, 3, 4), ResumedAt: []int64{2}}}}
	err := Check(&Input{Responses: []ResponseInput{in}}).Err()
	for _, want := range []string{"response r", "client c1", "missed 3..3", "starting_after=2"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("error %v does not mention %q", err, want)
		}
	}
	var v Violation
	if !errors.As(err, &v) || v.Invariant != InvClientView || v.Client != "c1" {
		t.Fatalf("errors.As: %+v", v)
	}
}

func TestCheck_OutputKept(t *testing.T) {
	t.Parallel()
	r := &run{id: "r", outputs: []string{"first-2", "second-2"}}
	t.Run("ShownItemMissingFromFinal", func(t *testing.T) {
		t.Parallel()
		l := r.log()
		setPayload(&l[len(l)-1], func(m map[string]any) {
			resp := m["response"].(map[string]any)
			resp["output"] = resp["output"].([]any)[:1]
		})
		requireExactly(t, logOnly("r", l), InvOutputKept)
	})
	t.Run("ShownItemChangedInFinal", func(t *testing.T) {
		t.Parallel()
		l := r.log()
		setPayload(&l[3], func(m map[string]any) {
			m["item"].(map[string]any)["content"].([]any)[0].(map[string]any)["text"] = "other"
		})
		requireExactly(t, logOnly("r", l), InvOutputKept)
	})
	t.Run("LiveResetWithdrawsEarlierItems", func(t *testing.T) {
		t.Parallel()
		l := r.log()
		// Items shown before a reset response.in_progress may differ from the final output.
		setPayload(&l[3], func(m map[string]any) { m["item"].(map[string]any)["id"] = "msg_withdrawn" })
		reset := l[1]
		l = slices.Insert(l, 4, reset)
		for i := range l {
			l[i].Seq = int64(i)
			setPayload(&l[i], func(m map[string]any) { m["sequence_number"] = i })
		}
		requireExactly(t, logOnly("r", l))
	})
}

func TestCheck_Record(t *testing.T) {
	t.Parallel()
	r := &run{id: "r", outputs: []string{"x"}}
	for _, tc := range []struct {
		name string
		edit func(rec *store.Response)
	}{
		{"NextSeqShort", func(rec *store.Response) { rec.NextSeq-- }},
		{"StatusDiffers", func(rec *store.Response) { rec.Status = store.StatusFailed }},
		{"SnapshotOutputDiffers", func(rec *store.Response) { rec.Snapshot = []byte(`{"id":"r","status":"completed","output":[]}`) }},
		{"SnapshotNotJSON", func(rec *store.Response) { rec.Snapshot = []byte(`nope`) }},
		{"OtherID", func(rec *store.Response) { rec.ID = "r2" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			in := r.input()
			tc.edit(in.Record)
			requireExactly(t, Check(&Input{Responses: []ResponseInput{in}}), InvRecord)
		})
	}
	t.Run("TerminalStatusWithoutTerminalEvent", func(t *testing.T) {
		t.Parallel()
		in := r.input()
		in.Log = in.Log[:len(in.Log)-1]
		in.Record.NextSeq--
		in.Clients, in.Reference = nil, nil
		requireExactly(t, Check(&Input{Responses: []ResponseInput{in}}), InvTerminal, InvRecord)
	})
}

func TestCheck_Reference(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		ref  Outcome
	}{
		{"OutputDiffers", Outcome{Status: "completed", Output: []string{"first-2", "done"}}},
		{"OutputMissing", Outcome{Status: "completed", Output: []string{"first-2", "second-2", "done", "extra"}}},
		{"StatusDiffers", Outcome{Status: "failed", Output: []string{"first-2", "second-2", "done"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			in := (&run{id: "r", outputs: []string{"first-2", "second-2", "done"}}).input()
			in.Reference = &tc.ref
			requireExactly(t, Check(&Input{Responses: []ResponseInput{in}}), InvReference)
		})
	}
	t.Run("NoTerminal", func(t *testing.T) {
		t.Parallel()
		in := (&run{id: "r", outputs: []string{"x"}}).input()
		in.Log = in.Log[:len(in.Log)-1]
		in.Record, in.Clients = nil, nil
		requireExactly(t, Check(&Input{Responses: []ResponseInput{in}}), InvTerminal, InvReference)
	})
}

func TestOutcomeOf(t *testing.T) {
	t.Parallel()
	payload := []byte(`{"type":"response.completed","sequence_number":9,"response":{"id":"r","status":"completed","output":[
		{"type":"message","content":[{"type":"output_text","text":"a"},{"type":"refusal","refusal":"no"},{"type":"output_text","text":"b"}]},
		{"type":"function_call","name":"approve","arguments":"{\"question\":\"q\"}"},
		{"type":"reasoning"}]}}`)
	got, err := OutcomeOf(payload)
	if err != nil {
		t.Fatal(err)
	}
	want := Outcome{Status: "completed", Output: []string{"ab", `function_call approve {"question":"q"}`, "reasoning"}}
	if !got.Equal(want) {
		t.Fatalf("OutcomeOf = %s, want %s", got, want)
	}
	if _, err := OutcomeOf([]byte(`{"type":"response.output_text.delta"}`)); err == nil {
		t.Fatal("OutcomeOf of an event without response: no error")
	}
	if _, err := OutcomeOf([]byte(`[`)); err == nil {
		t.Fatal("OutcomeOf of bad JSON: no error")
	}
	if _, err := SnapshotOutcome([]byte(`[`)); err == nil {
		t.Fatal("SnapshotOutcome of bad JSON: no error")
	}
}
