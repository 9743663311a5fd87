package crash

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
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

// The journal inside the superstep under real kills, on a model server in
// the test process that records every request it receives (it outlives
// the killed servers), the server SIGKILLed at seeded moments while the
// journalConfigs run. A run's model requests form one chain per agent
// turn in progress: the run's requests for the sequential demos (one agent
// at a time), one chain per agent for demo.orchestra (four agents in one
// superstep, each with its own call in flight). Telling apart the server
// processes that sent them (by connection), across all kills:
//
//   - a model request is sent again only by a later process than the one
//     that sent it, and only if it was its chain's last request before
//     that process went down: the call in flight at the kill, or answered
//     but not yet journaled. Any request answered before a later one of its
//     chain was sent is never sent again. So each kill (or graceful stop)
//     repeats at most one request per chain;
//   - a tool call is executed again only after a kill that came right
//     after it (nothing else of its agent was journaled in between):
//     executions per call id <= 1 + kills that landed while it ran;
//   - and, as in every crash test, the final output equals a crash-free
//     run's and package verify passes.
//
// It also logs the live resets the kills caused (see logLiveResets).
//
// -no-journal runs the servers with --no-journal, to show that these
// checks fail without the journal.
var (
	flagNoJournal    = flag.Bool("no-journal", false, "crash: run TestCrash_Journal_* with `serve --no-journal` (the checks then fail: they show what the journal saves)")
	flagJournalKills = flag.Int("journal-kills", 0, "crash: SIGKILLs per TestCrash_Journal_* test (0: 30)")
)

// journalConfigs: demo.tools turns of 4 model calls and 3 tool calls, and
// of 3 and 2; demo.writer-reviewer (a model call in each of two
// supersteps); demo.orchestra, four agents at once in one superstep
// making 3, 3, 2 and 3 model calls and 2, 2, 1 and 2 tool calls. All
// tagged so that the model server tells runs apart; in live publication
// but for tools-2.
var journalConfigs = []config{
	{name: "tools-3", model: "demo.tools", tagged: true, input: `please calculate {"a":6,"op":"*","b":7} for the log`,
		meta: map[string]string{"tool_calls": "3", "token_delay_ms": "3"}},
	{name: "tools-2", model: "demo.tools", tagged: true, input: `please calculate {"a":1.5,"op":"+","b":2} for the log`,
		meta: map[string]string{"tool_calls": "2", "token_delay_ms": "3", "publication": "committed"}},
	{name: "writer-reviewer", model: "demo.writer-reviewer", tagged: true,
		input: "write about a keeper who answers a message in a bottle before the storms",
		meta:  map[string]string{"token_delay_ms": "3"}},
	{name: "orchestra-4", model: "demo.orchestra", tagged: true, byAgent: true,
		input: `please calculate {"a":9,"op":"-","b":2.5} for the team`,
		meta:  map[string]string{"tool_calls": "2", "critic.tool_calls": "1", "token_delay_ms": "3"}},
}

func TestCrash_Journal_SQLite(t *testing.T) {
	t.Parallel()
	db := filepath.Join(proctest.WorkDir(t, *flagKeep, "superstep-crash"), "superstep.db")
	runJournalSuite(t, &backend{
		dbArg: db,
		open:  func(ctx context.Context) (store.Store, error) { return sqlite.Open(ctx, db, nil) },
	}, 30)
}

func TestCrash_Journal_Postgres(t *testing.T) {
	t.Parallel()
	db := pgtest.Database(t, "superstep_crash")
	runJournalSuite(t, &backend{
		dbArg:     db,
		open:      func(ctx context.Context) (store.Store, error) { return postgres.Open(ctx, db, nil) },
		extraArgs: postgresServeArgs,
	}, 30)
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
	// Each kill takes about a second (more on a loaded machine; on
	// PostgreSQL the killed server's leases must expire): 2 s each is the
	// deadline, not the cost.
	// Every fourth kill is aimed at two model requests of one workload in
	// flight at once (demo.orchestra's agents at once), which the random
	// moments alone missed in some seeds on a loaded machine.
	runSuite(t, b, &suite{configs: journalConfigs, kills: kills, serveArgs: args, jitterMS: 120, rotate: true,
		killBudget: 2 * time.Second, aimEvery: 4, aim: func() bool { return m.atOnce() >= 2 },
		check: func(ch *chaos, in *verify.Input) { checkJournal(ch, in, m) }})
}

// modelRequest is one request the counting model server received.
type modelRequest struct {
	tag   string // the workload's tag in the input
	agent string // the agent's instructions (the first system message)
	hash  [32]byte
	// accepted is when the request's connection was accepted: a server
	// process's connections are its own, so it tells which process sent
	// the request even when the handler ran after that process's kill.
	accepted   time.Time
	start, end time.Time // handler called; handler returned (reply written)
}

// countingModel is the local model server (package localmodel) in the
// test process, recording every request. It outlives the killed servers.
type countingModel struct {
	url  string
	next http.Handler
	mu   sync.Mutex
	reqs []modelRequest
	// inFlight counts the requests being answered, by workload tag.
	inFlight map[string]int
}

// atOnce returns the most requests of one workload being answered now.
func (m *countingModel) atOnce() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, k := range m.inFlight {
		n = max(n, k)
	}
	return n
}

// tagPattern finds a workload's tag in a request body.
var tagPattern = regexp.MustCompile(`\[([wr][0-9]{4})\]`)

// acceptedKey is the context key of a connection's accept time.
type acceptedKey struct{}

func startCountingModel(t *testing.T) *countingModel {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	m := &countingModel{url: "http://" + ln.Addr().String(), next: localmodel.NewHandler(nil), inFlight: map[string]int{}}
	srv := &http.Server{Handler: m, ReadHeaderTimeout: 10 * time.Second,
		ConnContext: func(ctx context.Context, _ net.Conn) context.Context {
			return context.WithValue(ctx, acceptedKey{}, time.Now())
		}}
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
	tag := ""
	if sub := tagPattern.FindSubmatch(body); sub != nil {
		tag = string(sub[1])
	}
	if tag != "" {
		m.mu.Lock()
		m.inFlight[tag]++
		m.mu.Unlock()
	}
	m.next.ServeHTTP(w, r)
	m.mu.Lock()
	if tag != "" {
		if m.inFlight[tag]--; m.inFlight[tag] == 0 {
			delete(m.inFlight, tag)
		}
	}
	m.mu.Unlock()
	if r.Method != http.MethodPost {
		return
	}
	rec := modelRequest{hash: sha256.Sum256(body), start: start, end: time.Now(), agent: instructions(body), tag: tag}
	rec.accepted, _ = r.Context().Value(acceptedKey{}).(time.Time)
	m.mu.Lock()
	m.reqs = append(m.reqs, rec)
	m.mu.Unlock()
}

// instructions returns the first system or developer message of a Chat
// Completions request: the agent's instructions.
func instructions(body []byte) string {
	var req struct {
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	if json.Unmarshal(body, &req) != nil {
		return ""
	}
	for _, msg := range req.Messages {
		if msg.Role == "system" || msg.Role == "developer" {
			return string(msg.Content)
		}
	}
	return ""
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

// chainCounts are what checkChain counted.
type chainCounts struct {
	requests int
	// spanning counts the process ends (kills, stops) with requests of
	// the chain on both sides; concurrent, the (process end, run) pairs
	// with two chains or more of one run on both sides.
	spanning, concurrent int
	// inFlight and unjournaled count the allowed repeats: of a request in
	// flight when its process went down, and of one answered before that.
	inFlight, unjournaled int
	// bad counts the repeats that are never allowed.
	bad int
}

func (c *chainCounts) add(d chainCounts) {
	c.requests += d.requests
	c.spanning += d.spanning
	c.concurrent += d.concurrent
	c.inFlight += d.inFlight
	c.unjournaled += d.unjournaled
	c.bad += d.bad
}

// checkJournal checks the model requests and tool executions across the
// kills (see the top of this file) and that clients' live streams render
// to the final output.
func checkJournal(ch *chaos, in *verify.Input, m *countingModel) {
	t := ch.t
	configOf := map[string]config{}
	for _, w := range ch.pool.All() {
		configOf[w.tag] = w.cfg
	}
	started, down := ch.cl.processTimes()
	byConfig := map[string]*chainCounts{}
	var all chainCounts
	for tag, rs := range m.requests() {
		cfg, ok := configOf[tag]
		if tag == "" || !ok {
			t.Errorf("%d model requests without a workload tag (%q)", len(rs), tag)
			continue
		}
		chains := map[string][]modelRequest{}
		for _, r := range rs {
			key := ""
			if cfg.byAgent {
				key = r.agent
			}
			chains[key] = append(chains[key], r)
		}
		if byConfig[cfg.name] == nil {
			byConfig[cfg.name] = &chainCounts{}
		}
		spans := map[int]int{} // chains spanning each process end
		for agent, c := range chains {
			name := tag
			if cfg.byAgent {
				name += " " + agent
			}
			n, ends := checkChain(ch, name, c, started, down)
			for _, p := range ends {
				spans[p]++
			}
			byConfig[cfg.name].add(n)
		}
		for _, k := range spans {
			if k > 1 {
				byConfig[cfg.name].concurrent++
			}
		}
	}
	for _, c := range byConfig {
		all.add(*c)
	}
	t.Logf("journal: %d model requests; %d (process end, chain) pairs with requests on both sides; repeated after a kill: %d in flight, %d answered but maybe not journaled (both allowed), %d others (never allowed)",
		all.requests, all.spanning, all.inFlight, all.unjournaled, all.bad)
	for _, cfg := range ch.s.configs {
		c := byConfig[cfg.name]
		if c == nil {
			c = &chainCounts{}
		}
		t.Logf("journal: %s: %d model requests, %d spanning (%d with agents at once), repeated %d in flight, %d answered, %d never allowed",
			cfg.name, c.requests, c.spanning, c.concurrent, c.inFlight, c.unjournaled, c.bad)
		// Every config must have had kills inside its turns, and the
		// agents that run at once must have been cut at once.
		if c.spanning == 0 || cfg.byAgent && c.concurrent == 0 {
			t.Errorf("seed %d: %s: no kill landed inside a turn (%d) or, for agents at once, inside several agents' turns at once (%d): the test did not test the journal there",
				ch.seed, cfg.name, c.spanning, c.concurrent)
		}
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
	logLiveResets(ch, in)
}

// checkChain checks one chain of model requests (in the order received)
// against the server processes that sent them: process i started at
// started[i] and, if it is no longer running, went down at down[i].
func checkChain(ch *chaos, name string, rs []modelRequest, started, down []time.Time) (_ chainCounts, ends []int) {
	t := ch.t
	n := chainCounts{requests: len(rs)}
	proc := make([]int, len(rs))
	for i, r := range rs {
		// The last process started before the connection was accepted.
		proc[i] = max(0, sort.Search(len(started), func(p int) bool { return started[p].After(r.accepted) })-1)
	}
	for p := range down {
		if slices.ContainsFunc(proc, func(q int) bool { return q <= p }) && slices.ContainsFunc(proc, func(q int) bool { return q > p }) {
			n.spanning++
			ends = append(ends, p)
		}
	}
	latest := map[[32]byte]int{} // the last request so far with a hash
	repeats := map[int]int{}     // by process
	for i, r := range rs {
		j, seen := latest[r.hash]
		latest[r.hash] = i
		if !seen {
			continue
		}
		p, q := proc[j], proc[i]
		// last is the chain's last request sent by a process before q.
		last := -1
		for k := range rs {
			if proc[k] < q && (last < 0 || rs[k].start.After(rs[last].start)) {
				last = k
			}
		}
		switch {
		case p >= q:
			n.bad++
			t.Errorf("seed %d: chain %s: model request %d of %d sent again (request %d) by the same server process %d, with no kill between",
				ch.seed, name, j+1, len(rs), i+1, q)
		case j != last:
			n.bad++
			t.Errorf("seed %d: chain %s: model request %d of %d, answered before the chain's request %d was sent, was sent again (request %d) after server process %d went down",
				ch.seed, name, j+1, len(rs), last+1, i+1, p)
		case repeats[q] > 0:
			n.bad++
			t.Errorf("seed %d: chain %s: server process %d repeated a second request of its predecessors (request %d, a repeat of %d)",
				ch.seed, name, q, i+1, j+1)
		case p < len(down) && rs[j].end.Before(down[p]):
			n.unjournaled++
		default:
			n.inFlight++
		}
		repeats[q]++
	}
	return n, ends
}

// checkToolExecutions reads the demo journal's tool lines ("<response>
// <step> tool:<name> <key> <call id>", one per execution) and requires
// that between two executions of one call a kill came, and that nothing
// else of the same agent in the response was journaled between the first
// and that kill: the call was running (its result not yet used) when the
// kill landed. A call is its response, idempotency key (which names the
// agent's executor) and call id: demo.orchestra's agents number their
// calls alike.
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
	type call struct{ resp, key, id string }
	execs := map[call][]int{}
	for i, fs := range lines {
		if len(fs) == 5 && strings.HasPrefix(fs[2], "tool:") {
			c := call{fs[0], fs[3], fs[4]}
			execs[c] = append(execs[c], i)
		}
	}
	calls, repeats := 0, 0
	for c, at := range execs {
		calls++
		agent := lineExecutor(lines[at[0]])
		for k := 1; k < len(at); k++ {
			repeats++
			prev := at[k-1]
			mark := slices.IndexFunc(ch.marks, func(m verify.CrashMark) bool { return m.JournalLen > prev })
			if mark < 0 || ch.marks[mark].JournalLen > at[k] {
				t.Errorf("seed %d: response %s: tool call %s of %s executed again (journal lines %d and %d) with no kill between", ch.seed, c.resp, c.id, agent, prev+1, at[k]+1)
				continue
			}
			for i := prev + 1; i < ch.marks[mark].JournalLen; i++ {
				if lines[i][0] == c.resp && lineExecutor(lines[i]) == agent {
					t.Errorf("seed %d: response %s: tool call %s of %s (journal line %d) finished and its agent went on (line %d: %s) before kill %d, yet it was executed again (line %d)",
						ch.seed, c.resp, c.id, agent, prev+1, i+1, strings.Join(lines[i], " "), mark+1, at[k]+1)
					break
				}
			}
		}
	}
	t.Logf("journal: %d tool calls, %d executions repeated (each after a kill that landed while it ran, unless reported above)", calls, repeats)
}

// lineExecutor returns the executor of a demo journal line: the executor
// id of "<response> <step> <executor>", the agent executor named at the
// end of the idempotency key ("<run>:<step>:<executor>") of a tool line.
func lineExecutor(fs []string) string {
	if len(fs) == 5 && strings.HasPrefix(fs[2], "tool:") {
		return fs[3][strings.LastIndexByte(fs[3], ':')+1:]
	}
	return strings.Join(fs[2:], " ")
}
