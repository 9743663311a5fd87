package verify

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseJournal(t *testing.T) {
	t.Parallel()
	got, err := ParseJournal(strings.NewReader("resp_1 1 start\n\nresp_1 2 worker 0\r\nresp_2 10 fan-in"))
	if err != nil {
		t.Fatal(err)
	}
	want := []JournalEntry{{"resp_1", 1, "start"}, {"resp_1", 2, "worker 0"}, {"resp_2", 10, "fan-in"}}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("entry %d = %v, want %v", i, got[i], want[i])
		}
	}
	if s := got[1].String(); s != "resp_1 2 worker 0" {
		t.Fatalf("String() = %q", s)
	}
	for _, bad := range []string{"resp_1 1", "resp_1 x start", "resp_1 0 start", " 1 start", "resp_1 -3 s", "resp_1 1 "} {
		if _, err := ParseJournal(strings.NewReader("resp_0 1 ok\n" + bad + "\n")); err == nil || !strings.Contains(err.Error(), "line 2") {
			t.Errorf("ParseJournal(%q) error = %v, want one naming line 2", bad, err)
		}
	}
}

func TestReadJournal(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "journal")
	if err := os.WriteFile(path, []byte("resp_1 1 start\nresp_1 2 end\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := ReadJournal(path)
	if err != nil || len(got) != 2 || got[1].ExecutorID != "end" {
		t.Fatalf("ReadJournal = %v, %v", got, err)
	}
	if _, err := ReadJournal(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Fatal("ReadJournal of a missing file: no error")
	}
}

// j builds journal entries from "resp step executor" strings.
func j(t *testing.T, lines ...string) []JournalEntry {
	t.Helper()
	out, err := ParseJournal(strings.NewReader(strings.Join(lines, "\n")))
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestCheck_Journal(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		journal func(t *testing.T) *Journal
		want    []Invariant
	}{
		{"NoCrashNoRerun", func(t *testing.T) *Journal {
			return &Journal{Entries: j(t, "a 1 s", "b 1 s", "a 2 w0", "a 2 w1", "b 2 w", "a 3 e")}
		}, nil},
		{"RerunWithoutCrash", func(t *testing.T) *Journal {
			return &Journal{Entries: j(t, "a 1 s", "a 2 w0", "a 2 w0")}
		}, []Invariant{InvRerunsPerCrash}},
		{"OneRerunPerCrash", func(t *testing.T) *Journal {
			return &Journal{Crashes: 2, Entries: j(t, "a 1 s", "a 2 w0", "a 2 w0", "a 2 w1", "a 2 w0", "a 2 w1", "a 3 e")}
		}, nil},
		{"TwoRerunsOneCrash", func(t *testing.T) *Journal {
			return &Journal{Crashes: 1, Entries: j(t, "a 1 s", "a 2 w0", "a 2 w0", "a 2 w0")}
		}, []Invariant{InvRerunsPerCrash}},
		{"TwoStepsRerunOneCrash", func(t *testing.T) *Journal {
			// Each crash interrupts one superstep of a run: two re-run steps need two crashes.
			return &Journal{Crashes: 1, Entries: j(t, "a 1 s", "a 1 s", "a 2 w", "a 2 w")}
		}, []Invariant{InvRerunsPerCrash}},
		{"CrashesArePerResponse", func(t *testing.T) *Journal {
			// One crash can interrupt a step of every run in flight.
			return &Journal{Crashes: 1, Entries: j(t, "a 1 s", "b 1 s", "a 1 s", "b 1 s")}
		}, nil},
		{"CommittedStepRanAgain", func(t *testing.T) *Journal {
			return &Journal{Crashes: 1, Entries: j(t, "a 1 s", "a 2 w", "a 1 s", "a 2 w")}
		}, []Invariant{InvCommittedRerun, InvRerunsPerCrash}},
		{"MarksOK", func(t *testing.T) *Journal {
			return &Journal{Crashes: 2, Entries: j(t, "a 1 s", "a 2 w", "a 3 e", "a 3 e", "b 1 s", "a 3 e"),
				Marks: []CrashMark{{JournalLen: 3, Committed: map[string]int64{"a": 2}}, {JournalLen: 4}}}
		}, nil},
		{"MarksCommittedRerun", func(t *testing.T) *Journal {
			// Step 3 had committed at the crash, yet it ran again: the order check
			// cannot see it (step 4 never started), the mark can.
			return &Journal{Crashes: 1, Entries: j(t, "a 1 s", "a 2 w", "a 3 e", "a 3 e"),
				Marks: []CrashMark{{JournalLen: 3, Committed: map[string]int64{"a": 3}}}}
		}, []Invariant{InvCommittedRerun}},
		{"MarksRerunWithinEpoch", func(t *testing.T) *Journal {
			// The budget allows one re-run, but it happened before the crash.
			return &Journal{Crashes: 1, Entries: j(t, "a 1 s", "a 1 s", "a 2 w"),
				Marks: []CrashMark{{JournalLen: 3}}}
		}, []Invariant{InvRerunsPerCrash}},
		{"RerunAfterLeaseEnd", func(t *testing.T) *Journal {
			// The run's lease lapsed with no crash (a starved host): its
			// superstep ran once more, within the marks too.
			return &Journal{Crashes: 1, Entries: j(t, "a 1 s", "a 2 w0", "a 2 w0", "b 1 s"),
				Marks: []CrashMark{{JournalLen: 4}}, LeaseEnds: map[string]int{"a": 1}}
		}, nil},
		{"LeaseEndsArePerResponse", func(t *testing.T) *Journal {
			return &Journal{Entries: j(t, "a 1 s", "a 2 w0", "a 2 w0"), LeaseEnds: map[string]int{"b": 1}}
		}, []Invariant{InvRerunsPerCrash}},
		{"TwoRerunsOneLeaseEnd", func(t *testing.T) *Journal {
			return &Journal{Entries: j(t, "a 1 s", "a 2 w0", "a 2 w0", "a 2 w0"), LeaseEnds: map[string]int{"a": 1}}
		}, []Invariant{InvRerunsPerCrash}},
		{"MarksCountWrong", func(t *testing.T) *Journal {
			return &Journal{Crashes: 2, Entries: j(t, "a 1 s"), Marks: []CrashMark{{JournalLen: 1}}}
		}, []Invariant{InvJournal}},
		{"MarksBeyondJournal", func(t *testing.T) *Journal {
			return &Journal{Crashes: 1, Entries: j(t, "a 1 s"), Marks: []CrashMark{{JournalLen: 2}}}
		}, []Invariant{InvJournal}},
		{"MarksGoBack", func(t *testing.T) *Journal {
			return &Journal{Crashes: 2, Entries: j(t, "a 1 s", "a 2 s"), Marks: []CrashMark{{JournalLen: 2}, {JournalLen: 1}}}
		}, []Invariant{InvJournal}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rep := Check(&Input{Journal: tc.journal(t)})
			requireExactly(t, rep, tc.want...)
		})
	}
}

// FuzzParseJournal checks that parsing never panics and that parsed entries
// print back to lines that parse to the same entries.
func FuzzParseJournal(f *testing.F) {
	f.Add("resp_1 1 start\nresp_1 2 worker-0\n")
	f.Add("r 3 a b c\r\n\n")
	f.Add("r x y\n")
	f.Fuzz(func(t *testing.T, text string) {
		entries, err := ParseJournal(strings.NewReader(text))
		if err != nil {
			return
		}
		var b strings.Builder
		for _, e := range entries {
			b.WriteString(e.String() + "\n")
		}
		again, err := ParseJournal(strings.NewReader(b.String()))
		if err != nil || len(again) != len(entries) {
			t.Fatalf("re-parse of %q: %v, %d entries, want %d", b.String(), err, len(again), len(entries))
		}
		for i := range entries {
			if again[i] != entries[i] {
				t.Fatalf("entry %d: %v, then %v", i, entries[i], again[i])
			}
		}
	})
}

func TestCheck_Journal_PerAttempt(t *testing.T) {
	t.Parallel()
	// "join" handles 4 messages per superstep, so one attempt writes 4 entries.
	per := func(_ string, _ int64, ex string) int {
		switch ex {
		case "join":
			return 4
		case "unknown":
			return 0
		}
		return 1
	}
	join := func(n int) []string {
		var out []string
		for range n {
			out = append(out, "a 3 join")
		}
		return out
	}
	for _, tc := range []struct {
		name    string
		journal *Journal
		want    []Invariant
	}{
		{"OneAttempt", &Journal{PerAttempt: per, Entries: j(t, append([]string{"a 1 s"}, join(4)...)...)}, nil},
		{"OneAttemptWithoutPerAttempt", &Journal{Entries: j(t, join(4)...)}, []Invariant{InvRerunsPerCrash}},
		{"TwoAttemptsNoCrash", &Journal{PerAttempt: per, Entries: j(t, join(8)...)}, []Invariant{InvRerunsPerCrash}},
		{"InterruptedThenFull", &Journal{PerAttempt: per, Crashes: 1, Entries: j(t, join(6)...),
			Marks: []CrashMark{{JournalLen: 2, Committed: map[string]int64{"a": 2}}}}, nil},
		{"TooManyBetweenCrashes", &Journal{PerAttempt: per, Crashes: 1, Entries: j(t, join(9)...),
			Marks: []CrashMark{{JournalLen: 5}}}, []Invariant{InvRerunsPerCrash}},
		{"UnknownIsNotCounted", &Journal{PerAttempt: per, Entries: j(t, "a 1 unknown", "a 1 unknown", "a 1 unknown")}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			requireExactly(t, Check(&Input{Journal: tc.journal}), tc.want...)
		})
	}
}
