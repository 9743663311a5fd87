package verify

import (
	"fmt"
	"testing"
)

// BenchmarkCheck checks one response of 2,003 events seen by three clients
// (one resumed twice) and a journal of 10,000 entries with 10 crash marks.
func BenchmarkCheck(b *testing.B) {
	outs := make([]string, 1000)
	for i := range outs {
		outs[i] = fmt.Sprintf("output %d", i)
	}
	in := (&run{id: "resp_bench", outputs: outs}).input()
	in.Clients = append(in.Clients,
		ClientView{Name: "resumed", Events: received(in.Log, 0, len(in.Log)), ResumedAt: []int64{10, 500}},
		ClientView{Name: "late", StartAt: 1000, Events: received(in.Log, 1000, len(in.Log))})
	j := &Journal{Crashes: 10}
	for i := range 10000 {
		j.Entries = append(j.Entries, JournalEntry{fmt.Sprintf("resp_%d", i%50), int64(i/50 + 1), "x"})
		if i%1000 == 999 {
			j.Marks = append(j.Marks, CrashMark{JournalLen: i + 1})
		}
	}
	input := &Input{Responses: []ResponseInput{in}, Journal: j}
	b.ReportAllocs()
	for b.Loop() {
		if err := Check(input).Err(); err != nil {
			b.Fatal(err)
		}
	}
}
