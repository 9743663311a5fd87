package crash

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"flag"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/superstep/superstep/internal/testkit/pgtest"
	"github.com/superstep/superstep/internal/testkit/proctest"
	"github.com/superstep/superstep/localmodel"
	"github.com/superstep/superstep/store"
	"github.com/superstep/superstep/store/postgres"
	"github.com/superstep/superstep/store/sqlite"
	"github.com/superstep/superstep/verify"
)

// The journal inside the superstep under real kills: demo.tools turns of
// four model calls and three tool calls (one superstep each) on a model
// server in the test process that records every request it receives, the
// server SIGKILLed at seeded moments. Across all kills:
//
//   - a model request answered before a kill is never sent again, except
//     the last one its run sent before the kill (its reply may not have
//     been journaled yet: the call in flight), so at most one request per
//     kill and run is repeated;
//   - a tool call is executed again only after a kill that came right
//     after it (nothing else of its response was journaled in between):
//     executions per call id <= 1 + kills that landed while it ran;
//   - and, as in every crash test, the final output equals a crash-free
//     run's and package verify passes.
//
// -no-journal runs the servers with --no-journal, to show that these
// checks fail without the journal.
var (
	flagNoJournal    = flag.Bool("no-journal", false, "crash: run TestCrash_Journal_* with `serve --no-journal` (the checks then fail: they show what the journal saves)")
	flagJournalKills = flag.Int("journal-kills", 0, "crash: SIGKILLs per TestCrash_Journal_* test (0: 20 on SQLite, 15 on PostgreSQL)")
)

// journalConfigs: demo.tools turns of 4 model calls and 3 tool calls, and
// of 3 and 2, tagged so that the model server tells runs apart.
var journalConfigs = []config{
	{name: "tools-3", model: "demo.tools", tagged: true, input: `please calculate {"a":6,"op":"*","b":7} for the log`,
		meta: map[string]string{"tool_calls": "3", "token_delay_ms": "3"}},
	{name: "tools-2", model: "demo.tools", tagged: true, input: `please calculate {"a":1.5,"op":"+","b":2} for the log`,
		meta: map[string]string{"tool_calls": "2", "token_delay_ms": "3", "publication": "committed"}},
}

func TestCrash_Journal_SQLite(t *testing.T) {
	t.Parallel()
	db := filepath.Join(proctest.WorkDir(t, *flagKeep, "superstep-crash"), "superstep.db")
	runJournalSuite(t, &backend{
		dbArg: db,
		open:  func(ctx context.Context) (store.Store, error) { return sqlite.Open(ctx, db, nil) },
	}, 20)
}

func TestCrash_Journal_Postgres(t *testing.T) {
	t.Parallel()
	db := pgtest.Database(t, "superstep_crash")
	runJournalSuite(t, &backend{
		dbArg:     db,
		open:      func(ctx context.Context) (store.Store, error) { return postgres.Open(ctx, db, nil) },
		extraArgs: postgresServeArgs,
	}, 15)
}

func runJournalSuite(t *testing.T, b *backend, kills int) {
	if *flagJournalKills > 0 {
		kills = *flagJournalKills
	}
	m := startCountingModel(t)
	args := []string{"--model-server", m.url + "/v1", "--openai-api-key", "test"}
	if *flagNoJournal {
		args = append(args, "--no-journal")
	}
	runSuite(t, b, &suite{configs: journalConfigs, kills: kills, serveArgs: args, jitterMS: 120,
		check: func(ch *chaos, in *verify.Input) { checkJournal(ch, in, m) }})
}

// modelRequest is one request the counting model server received.
type modelRequest struct {
	tag        string // the workload's tag in the input
	hash       [32]byte
	start, end time.Time // received; handler returned (reply written)
}

// countingModel is the local model server (package localmodel) in the
// test process, recording every request. It outlives the killed servers.
type countingModel struct {
	url  string
	next http.Handler
	mu   sync.Mutex
	reqs []modelRequest
}

// tagPattern finds a workload's tag in a request body.
var tagPattern = regexp.MustCompile(`\[([wr][0-9]{4})\]`)

func startCountingModel(t *testing.T) *countingModel {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	m := &countingModel{url: "http://" + ln.Addr().String(), next: localmodel.NewHandler(nil)}
	srv := &http.Server{Handler: m, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("counting model server: %v", err)
		}
	}()
	t.Cleanup(func() {
		_ = srv.Close()
		<-done
	})
	return m
}

func (m *countingModel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	m.next.ServeHTTP(w, r)
	if r.Method != http.MethodPost {
		return
	}
	rec := modelRequest{hash: sha256.Sum256(body), start: start, end: time.Now()}
	if sub := tagPattern.FindSubmatch(body); sub != nil {
		rec.tag = string(sub[1])
	}
	m.mu.Lock()
	m.reqs = append(m.reqs, rec)
	m.mu.Unlock()
}

// requests returns the recorded requests by tag, in the order received.
func (m *countingModel) requests() map[string][]modelRequest {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string][]modelRequest{}
	for _, r := range m.reqs {
		out[r.tag] = append(out[r.tag], r)
	}
	for _, rs := range out {
		slices.SortFunc(rs, func(a, b modelRequest) int { return a.start.Compare(b.start) })
	}
	return out
}

// checkJournal checks the model requests and tool executions across the
// kills (see the top of this file) and that clients' live streams render
// to the final output.
func checkJournal(ch *chaos, in *verify.Input, m *countingModel) {
	t := ch.t
	total, repeatedLast, repeatedFinished, spanning := 0, 0, 0, 0
	for tag, rs := range m.requests() {
		if tag == "" {
			t.Errorf("a model request without a workload tag")
			continue
		}
		total += len(rs)
		bad := map[[32]byte]bool{}
		for _, kill := range ch.killedAt {
			last := -1 // the last request sent before the kill
			for i, r := range rs {
				if r.start.Before(kill) {
					last = i
				}
			}
			if last < 0 || last == len(rs)-1 {
				continue
			}
			spanning++
			for i, r := range rs[:last+1] {
				if !r.end.Before(kill) {
					continue // not answered before the kill
				}
				again := slices.IndexFunc(rs[last+1:], func(o modelRequest) bool { return o.hash == r.hash })
				switch {
				case again < 0:
				case r.hash == rs[last].hash:
					// The call in flight at the kill (or answered, its
					// reply not yet journaled), or an earlier send of it
					// after an earlier kill.
					if i == last {
						repeatedLast++
					}
				case !bad[r.hash]:
					bad[r.hash] = true
					repeatedFinished++
					t.Errorf("seed %d: workload %s: model request %d of %d, answered %v before a kill, was sent again after it (the run's request %d was sent after it before the kill)",
						ch.seed, tag, i+1, len(rs), kill.Sub(r.end).Round(time.Millisecond), last+1)
				}
			}
		}
	}
	t.Logf("journal: %d model requests; %d (kill, run) pairs with requests on both sides of the kill; repeated after a kill: %d in flight (allowed), %d answered earlier (never allowed)",
		total, spanning, repeatedLast, repeatedFinished)
	if spanning == 0 {
		t.Errorf("seed %d: no kill landed inside a turn: the test did not test the journal", ch.seed)
	}
	checkToolExecutions(ch)
	for _, r := range in.Responses {
		for _, v := range r.Clients {
			if v.StartAt != 0 || len(v.Events) == 0 || !verify.IsTerminal(v.Events[len(v.Events)-1].Type) {
				continue
			}
			if err := render(v.Events); err != nil {
				t.Errorf("seed %d: response %s, client %s: %v", ch.seed, r.ID, v.Name, err)
			}
		}
	}
}

// checkToolExecutions reads the demo journal's tool lines ("<response>
// <step> tool:<name> <key> <call id>", one per execution) and requires
// that between two executions of one call a kill came, and that nothing
// else of the response was journaled between the first and that kill:
// the call was running (its result not yet used) when the kill landed.
func checkToolExecutions(ch *chaos) {
	t := ch.t
	f, err := os.Open(ch.cl.journal)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines [][]string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if fs := strings.Fields(sc.Text()); len(fs) > 0 {
			lines = append(lines, fs)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	type call struct{ resp, id string }
	execs := map[call][]int{}
	for i, fs := range lines {
		if len(fs) == 5 && strings.HasPrefix(fs[2], "tool:") {
			c := call{fs[0], fs[4]}
			execs[c] = append(execs[c], i)
		}
	}
	calls, repeats := 0, 0
	for c, at := range execs {
		calls++
		for k := 1; k < len(at); k++ {
			repeats++
			prev := at[k-1]
			mark := slices.IndexFunc(ch.marks, func(m verify.CrashMark) bool { return m.JournalLen > prev })
			if mark < 0 || ch.marks[mark].JournalLen > at[k] {
				t.Errorf("seed %d: response %s: tool call %s executed again (journal lines %d and %d) with no kill between", ch.seed, c.resp, c.id, prev+1, at[k]+1)
				continue
			}
			for i := prev + 1; i < ch.marks[mark].JournalLen; i++ {
				if lines[i][0] == c.resp {
					t.Errorf("seed %d: response %s: tool call %s (journal line %d) finished and its response went on (line %d: %s) before kill %d, yet it was executed again (line %d)",
						ch.seed, c.resp, c.id, prev+1, i+1, strings.Join(lines[i], " "), mark+1, at[k]+1)
					break
				}
			}
		}
	}
	t.Logf("journal: %d tool calls, %d executions repeated after a kill that landed while they ran", calls, repeats)
}
