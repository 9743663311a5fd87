package responses

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/superstep/superstep/examples"
	"github.com/superstep/superstep/host"
	"github.com/superstep/superstep/internal/testkit/pgtest"
	"github.com/superstep/superstep/store"
	"github.com/superstep/superstep/store/postgres"
)

// newInspectServer is newTestServer keeping every checkpoint (forks start
// from any step), with keys.
func newInspectServer(t *testing.T, st store.Store, keys map[string]string) *testServer {
	t.Helper()
	h, err := host.New(st, &host.Config{Logger: testLogger(), CommitBackoff: time.Millisecond, KeepCheckpoints: -1})
	if err != nil {
		t.Fatal(err)
	}
	if err := examples.Register(h); err != nil {
		t.Fatal(err)
	}
	if err := h.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	handler, err := NewHandler(h, &Options{Logger: testLogger(), APIKeys: keys})
	if err != nil {
		t.Fatal(err)
	}
	ts := &testServer{t: t, store: st, host: h, srv: httptest.NewServer(handler),
		http: &http.Client{Timeout: time.Minute, Transport: &http.Transport{}}}
	t.Cleanup(ts.close)
	return ts
}

// as returns a copy of ts sending key.
func (ts *testServer) as(key string) *testServer {
	c := *ts
	c.key = key
	return &c
}

// getJSON GETs path, requires status 200 and decodes the body into v.
func (ts *testServer) getJSON(path string, v any) {
	ts.t.Helper()
	rp := ts.do("GET", path, "")
	if rp.status != 200 {
		ts.t.Fatalf("GET %s: %d %s", path, rp.status, rp.body)
	}
	if err := json.Unmarshal([]byte(rp.body), v); err != nil {
		ts.t.Fatalf("GET %s: %v: %s", path, err, rp.body)
	}
}

// createSync creates a response and waits for its end; it returns the
// final Response object.
func (ts *testServer) createSync(body string) map[string]any {
	ts.t.Helper()
	rp := ts.do("POST", "/v1/responses", body)
	var r map[string]any
	if rp.status != 200 || json.Unmarshal([]byte(rp.body), &r) != nil {
		ts.t.Fatalf("create: %d %s", rp.status, rp.body)
	}
	return r
}

func (ts *testServer) runOf(respID string) runSummary {
	ts.t.Helper()
	var l runList
	ts.getJSON("/v1/runs?response_id="+respID, &l)
	if len(l.Data) != 1 {
		ts.t.Fatalf("runs of %s: %+v", respID, l)
	}
	return l.Data[0]
}

// outputTexts returns the texts of a Response object's output messages.
func outputTexts(r map[string]any) []string {
	var out []string
	items, _ := r["output"].([]any)
	for _, it := range items {
		m, _ := it.(map[string]any)
		parts, _ := m["content"].([]any)
		for _, p := range parts {
			pm, _ := p.(map[string]any)
			if s, ok := pm["text"].(string); ok {
				out = append(out, s)
			}
		}
	}
	return out
}

func TestRuns_ListGetCheckpoints(t *testing.T) {
	ts := newInspectServer(t, openSQLiteFile(t), nil)
	r := ts.createSync(`{"model":"demo.two-outputs","input":"x"}`)
	respID := r["id"].(string)
	sum := ts.runOf(respID)
	if sum.Status != "completed" || sum.Active || sum.LastStep != 3 || sum.HeadResponseID != respID || sum.Object != "run" ||
		sum.Model != examples.TwoOutputs || sum.ForkedFrom != nil || sum.CreatedAt == 0 {
		t.Fatalf("summary: %+v", sum)
	}

	var d runDetail
	ts.getJSON("/v1/runs/"+sum.ID, &d)
	if len(d.Responses) != 1 || d.Responses[0].ID != respID || d.Responses[0].CommitStep != 3 || d.Responses[0].CompletedAt == nil {
		t.Fatalf("responses: %+v", d.Responses)
	}
	wantExec := [][]string{{"start"}, {"pair"}, {"finish"}}
	if len(d.Supersteps) != 3 {
		t.Fatalf("supersteps: %+v", d.Supersteps)
	}
	if len(d.LeaseHistory) != 1 || d.LeaseHistory[0].Epoch != 1 || d.LeaseHistory[0].LastStep != 0 || d.LeaseHistory[0].Owner == "" {
		t.Fatalf("lease history: %+v", d.LeaseHistory)
	}
	for i, ss := range d.Supersteps {
		if ss.Step != int64(i+1) || ss.ResponseID != respID || ss.CommittedAt == nil || !slices.Equal(ss.Executors, wantExec[i]) ||
			ss.Epoch == nil || *ss.Epoch != 1 || ss.Host == nil || *ss.Host != d.LeaseHistory[0].Owner {
			t.Errorf("superstep %d: %+v", i+1, ss)
		}
	}
	// Each commit wrote its events (the first its response.in_progress),
	// one range after the other from sequence 1 (0 is response.created).
	next := int64(1)
	for _, ss := range d.Supersteps {
		if ss.FirstSeq == nil || *ss.FirstSeq != next || *ss.LastSeq < *ss.FirstSeq {
			t.Fatalf("superstep %d: events %v..%v, want from %d", ss.Step, ss.FirstSeq, ss.LastSeq, next)
		}
		next = *ss.LastSeq + 1
	}
	if next != d.Responses[0].NextSeq {
		t.Errorf("the steps' events end at %d, the log at %d", next, d.Responses[0].NextSeq)
	}
	if d.Graph == nil || d.Graph.Start != "start" || len(d.Graph.Executors) != 3 || len(d.Graph.Edges) != 2 ||
		d.Graph.Edges[0] != (graphEdgeOut{From: "start", To: "pair", Kind: "direct"}) {
		t.Errorf("graph: %+v", d.Graph)
	}

	var cl checkpointList
	ts.getJSON("/v1/runs/"+sum.ID+"/checkpoints", &cl)
	if len(cl.Data) != 4 || cl.Data[0].Step != 0 || cl.Data[0].ParentStep != -1 || cl.Data[3].Step != 3 || cl.Data[3].ParentStep != 2 {
		t.Fatalf("checkpoints: %+v", cl.Data)
	}
	for _, c := range cl.Data {
		var total int64
		changed := 0
		for _, p := range c.Parts {
			total += p.Size
			if p.Changed {
				changed++
			}
			if c.Step == 0 && !p.Changed {
				t.Errorf("step 0 part %s unchanged: no parent to compare with", p.Name)
			}
		}
		if total != c.Size || changed == 0 {
			t.Errorf("checkpoint %d: size %d, parts total %d, %d changed", c.Step, c.Size, total, changed)
		}
	}
}

func TestRuns_CheckpointData(t *testing.T) {
	ts := newInspectServer(t, openSQLiteFile(t), nil)
	r := ts.createSync(`{"model":"demo.two-outputs","input":"x"}`)
	runID := ts.runOf(r["id"].(string)).ID
	var cl checkpointList
	ts.getJSON("/v1/runs/"+runID+"/checkpoints?include=data", &cl)
	cp, err := ts.store.CheckpointGet(context.Background(), runID, 2)
	if err != nil {
		t.Fatal(err)
	}
	got := cl.Data[2]
	if got.Step != 2 || len(got.Parts) != len(cp.Parts) {
		t.Fatalf("checkpoint 2: %+v", got)
	}
	for i, p := range got.Parts {
		if p.Data == nil || *p.Data != string(cp.Parts[i].Data) || p.DataBase64 != nil || p.Truncated {
			t.Errorf("part %s: %+v", p.Name, p)
		}
	}
	var plain checkpointList
	ts.getJSON("/v1/runs/"+runID+"/checkpoints", &plain)
	if plain.Data[2].Parts[0].Data != nil {
		t.Errorf("data without include=data")
	}
	if rp := ts.do("GET", "/v1/runs/"+runID+"/checkpoints?include=everything", ""); rp.status != 400 {
		t.Errorf("include=everything: %d %s", rp.status, rp.body)
	}

	// Bytes that are not UTF-8 go as base64; long ones are cut.
	var v partView
	v.withData([]byte{0xff, 0x00, 'a'})
	if v.Data != nil || v.DataBase64 == nil || *v.DataBase64 != "/wBh" {
		t.Errorf("binary part: %+v", v)
	}
	v = partView{}
	long := strings.Repeat("é", partDataMax) // 2 bytes each: cut inside a rune
	v.withData([]byte(long))
	if v.Data == nil || !v.Truncated || len(*v.Data) > partDataMax || !strings.HasPrefix(long, *v.Data) || !utf8.ValidString(*v.Data) {
		t.Errorf("long part: truncated %v, %d bytes", v.Truncated, len(*v.Data))
	}
}

func TestRuns_PendingRequests(t *testing.T) {
	ts := newInspectServer(t, openSQLiteFile(t), nil)
	r := ts.createSync(`{"model":"demo.approval","input":"ship it?"}`)
	var d runDetail
	ts.getJSON("/v1/runs/"+ts.runOf(r["id"].(string)).ID, &d)
	if len(d.PendingRequests) != 1 || d.PendingRequests[0].CallID == "" || !strings.Contains(d.PendingRequests[0].Arguments, "ship it?") {
		t.Fatalf("pending: %+v", d.PendingRequests)
	}
}

func TestRuns_VisibilityPerOwner(t *testing.T) {
	ts := newInspectServer(t, openSQLiteFile(t), map[string]string{"key-a": "alice", "key-b": "bob"})
	a, b := ts.as("key-a"), ts.as("key-b")
	r := a.createSync(`{"model":"demo.echo","input":"hi"}`)
	run := a.runOf(r["id"].(string))

	var l runList
	b.getJSON("/v1/runs", &l)
	if len(l.Data) != 0 || l.FirstID != nil {
		t.Fatalf("bob lists alice's runs: %+v", l)
	}
	b.getJSON("/v1/runs?response_id="+r["id"].(string), &l)
	if len(l.Data) != 0 {
		t.Fatalf("bob finds alice's run by response: %+v", l)
	}
	for _, rq := range []struct{ method, path, body string }{
		{"GET", "/v1/runs/" + run.ID, ""},
		{"GET", "/v1/runs/" + run.ID + "/checkpoints", ""},
		{"POST", "/v1/runs/" + run.ID + "/fork", `{"step":0}`},
		{"GET", "/v1/runs/run_doesnotexist", ""},
	} {
		rp := b.do(rq.method, rq.path, rq.body)
		if e := errorOf(t, rp); rp.status != 404 || e.Code == nil || *e.Code != "not_found" {
			t.Errorf("%s %s as bob: %d %s", rq.method, rq.path, rp.status, rp.body)
		}
	}
	// A cursor naming alice's run tells bob nothing but "not found".
	if rp := b.do("GET", "/v1/runs?after="+run.ID, ""); rp.status != 400 {
		t.Errorf("bob's cursor on alice's run: %d %s", rp.status, rp.body)
	}
	a.getJSON("/v1/runs", &l)
	if len(l.Data) != 1 || l.Data[0].ID != run.ID {
		t.Fatalf("alice's list: %+v", l)
	}
	if rp := ts.do("GET", "/v1/runs", ""); rp.status != 401 {
		t.Fatalf("no key: %d", rp.status)
	}
}

func TestRuns_Paging(t *testing.T) {
	ts := newInspectServer(t, openSQLiteFile(t), nil)
	var ids []string // oldest first
	for i := range 5 {
		model := examples.Echo
		if i%2 == 1 {
			model = examples.Approval
		}
		r := ts.createSync(fmt.Sprintf(`{"model":%q,"input":"n%d"}`, model, i))
		ids = append(ids, ts.runOf(r["id"].(string)).ID)
		time.Sleep(2 * time.Millisecond) // distinct creation times; ties are ordered by id anyway
	}
	var got []string
	after := ""
	for page := 0; ; page++ {
		var l runList
		path := "/v1/runs?limit=2"
		if after != "" {
			path += "&after=" + after
		}
		ts.getJSON(path, &l)
		for _, r := range l.Data {
			got = append(got, r.ID)
		}
		if !l.HasMore {
			break
		}
		after = *l.LastID
		if page > 5 {
			t.Fatal("paging does not end")
		}
	}
	want := slices.Clone(ids)
	slices.Reverse(want)
	if !slices.Equal(got, want) {
		t.Fatalf("desc pages: %v, want %v", got, want)
	}
	var l runList
	ts.getJSON("/v1/runs?order=asc&limit=100", &l)
	if len(l.Data) != 5 || l.Data[0].ID != ids[0] || *l.FirstID != ids[0] || *l.LastID != ids[4] || l.HasMore {
		t.Fatalf("asc: %+v", l)
	}
	ts.getJSON("/v1/runs?model=demo.approval", &l)
	if len(l.Data) != 2 || l.Data[0].ID != ids[3] {
		t.Fatalf("model filter: %+v", l)
	}
	ts.getJSON("/v1/runs?status=completed", &l)
	if len(l.Data) != 5 {
		t.Fatalf("status filter: %+v", l)
	}
	ts.getJSON("/v1/runs?status=active", &l)
	if len(l.Data) != 0 {
		t.Fatalf("active filter: %+v", l)
	}
	ts.getJSON(fmt.Sprintf("/v1/runs?created_before=%d", time.Now().Add(-time.Hour).Unix()), &l)
	if len(l.Data) != 0 {
		t.Fatalf("created_before: %+v", l)
	}
}

func TestRuns_BadQueries(t *testing.T) {
	ts := newInspectServer(t, openSQLiteFile(t), nil)
	for _, tc := range []struct{ query, param string }{
		{"limit=0", "limit"}, {"limit=101", "limit"}, {"limit=x", "limit"},
		{"order=up", "order"}, {"status=done", "status"}, {"after=resp_1", "after"},
		{"after=run_unknown", "after"}, {"response_id=run_1", "response_id"},
		{"created_after=-1", "created_after"}, {"colour=red", "colour"}, {"limit=1&limit=2", "limit"},
		{"model=%00", "model"},
	} {
		rp := ts.do("GET", "/v1/runs?"+tc.query, "")
		e := errorOf(t, rp)
		if rp.status != 400 || e.Param == nil || *e.Param != tc.param || e.Type != typeInvalidRequest {
			t.Errorf("%s: %d %s", tc.query, rp.status, rp.body)
		}
	}
	for _, path := range []string{"/v1/runs/resp_abc", "/v1/runs/run_%20x/checkpoints"} {
		if rp := ts.do("GET", path, ""); rp.status != 404 {
			t.Errorf("%s: %d %s", path, rp.status, rp.body)
		}
	}
}

func FuzzParseRunsQuery(f *testing.F) {
	for _, s := range []string{"", "limit=5&order=asc", "status=active", "after=run_1&model=demo.echo",
		"response_id=resp_x", "created_after=5&created_before=6", "limit=%ff", "host=a&status=failed"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		vals, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		q, err := parseRunsQuery(vals)
		if err != nil {
			ae := toAPIError(err)
			if ae.Status != 400 || ae.Param == "" {
				t.Fatalf("%q: %+v", raw, ae)
			}
			return
		}
		p := q.params
		if p.Limit < 1 || p.Limit > runsLimitMax || p.After != "" && !validRunID(p.After) ||
			p.Status != "" && !p.Status.Valid() || !validText(p.Model) || !validText(p.LeaseOwner) {
			t.Fatalf("%q accepted as %+v", raw, p)
		}
	})
}

// storeState is a run's durable state: its responses' logs and its
// checkpoints (every part's bytes).
func storeState(t *testing.T, st store.Store, runID string) string {
	t.Helper()
	ctx := context.Background()
	var b strings.Builder
	resps, err := st.ResponseListByRun(ctx, runID)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range resps {
		fmt.Fprintf(&b, "response %s %s next=%d commit=%d\n", r.ID, r.Status, r.NextSeq, r.CommitStep)
		evs, err := st.EventList(ctx, &store.EventListParams{ResponseID: r.ID, After: -1, Limit: 100000})
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range evs {
			fmt.Fprintf(&b, "  %d %s %d %q\n", ev.Seq, ev.Type, ev.Step, ev.Payload)
		}
	}
	infos, err := st.CheckpointList(ctx, runID)
	if err != nil {
		t.Fatal(err)
	}
	for _, ci := range infos {
		cp, err := st.CheckpointGet(ctx, runID, ci.Step)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "checkpoint %d parent %d\n", cp.Step, cp.ParentStep)
		for _, p := range cp.Parts {
			fmt.Fprintf(&b, "  %s %x\n", p.Name, p.Data)
		}
	}
	return b.String()
}

// forkBody POSTs a fork and decodes the Response object replied.
func (ts *testServer) fork(runID, body string) map[string]any {
	ts.t.Helper()
	rp := ts.do("POST", "/v1/runs/"+runID+"/fork", body)
	var r map[string]any
	if rp.status != 200 || json.Unmarshal([]byte(rp.body), &r) != nil {
		ts.t.Fatalf("fork %s %s: %d %s", runID, body, rp.status, rp.body)
	}
	return r
}

// testFork forks a three-step run from step 1 and an approval from its
// question, and checks the forks' outputs, lineage and steps and that the
// originals are untouched.
func testFork(t *testing.T, ts *testServer) {
	orig := ts.createSync(`{"model":"demo.two-outputs","input":"x"}`)
	run := ts.runOf(orig["id"].(string))
	before := storeState(t, ts.store, run.ID)

	fork := ts.fork(run.ID, `{"step":1}`)
	if fork["status"] != "completed" {
		t.Fatalf("fork: %v", fork)
	}
	// From step 1's state the run yields what steps 2 and 3 yield, as the
	// original did.
	want := []string{"first-2", "second-2", "done"}
	if got := outputTexts(fork); !slices.Equal(got, want) {
		t.Fatalf("fork output %q, want %q", got, want)
	}
	if got := outputTexts(orig); !slices.Equal(got, want) {
		t.Fatalf("original output %q", got)
	}
	fr := ts.runOf(fork["id"].(string))
	if fr.ForkedFrom == nil || fr.ForkedFrom.RunID != run.ID || fr.ForkedFrom.Step != 1 || fr.LastStep != 3 || fr.ID == run.ID {
		t.Fatalf("fork run: %+v", fr)
	}
	var d runDetail
	ts.getJSON("/v1/runs/"+fr.ID, &d)
	if len(d.Supersteps) != 2 || d.Supersteps[0].Step != 2 || !slices.Equal(d.Supersteps[0].Executors, []string{"pair"}) {
		t.Fatalf("fork supersteps: %+v", d.Supersteps)
	}
	// The fork's first checkpoint holds the original's step-1 bytes.
	a, err := ts.store.CheckpointGet(context.Background(), run.ID, 1)
	if err != nil {
		t.Fatal(err)
	}
	b, err := ts.store.CheckpointGet(context.Background(), fr.ID, 1)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(a.Parts) != fmt.Sprint(b.Parts) {
		t.Fatalf("fork's step-1 checkpoint differs from the original's")
	}

	// A fork of a question answered otherwise: the original asked, the
	// fork (from step 1, input the answer) decides.
	q := ts.createSync(`{"model":"demo.approval","input":"ship?"}`)
	qrun := ts.runOf(q["id"].(string))
	var qd runDetail
	ts.getJSON("/v1/runs/"+qrun.ID, &qd)
	callID := qd.PendingRequests[0].CallID
	qbefore := storeState(t, ts.store, qrun.ID)
	for answer, want := range map[string]string{"approve": "approved", "reject": "rejected"} {
		f := ts.fork(qrun.ID, fmt.Sprintf(`{"step":1,"input":[{"type":"function_call_output","call_id":%q,"output":%q}]}`, callID, answer))
		if got := outputTexts(f); !slices.Equal(got, []string{want}) {
			t.Fatalf("fork with %s: %q", answer, got)
		}
	}
	if got := storeState(t, ts.store, qrun.ID); got != qbefore {
		t.Errorf("the approval run changed:\n%s\nwas:\n%s", got, qbefore)
	}
	// The original still waits for its answer, and can be given it.
	cont := ts.createSync(fmt.Sprintf(`{"model":"demo.approval","previous_response_id":%q,"input":[{"type":"function_call_output","call_id":%q,"output":"approve"}]}`,
		q["id"], callID))
	if got := outputTexts(cont); !slices.Equal(got, []string{"approved"}) {
		t.Fatalf("original continued: %q", got)
	}

	// Errors: a step not kept, a bad body; nothing is stored by them.
	runsBefore := countRuns(t, ts.store)
	for _, tc := range []struct{ body, param, code string }{
		{`{"step":9}`, "step", "checkpoint_not_found"},
		{`{}`, "step", "missing_required_parameter"},
		{`{"step":-1}`, "step", codeInvalidValue},
		{`{"step":1,"colour":1}`, "", codeInvalidValue},
		{`{"step":1,"input":[{"type":"function_call_output","call_id":"nope","output":"x"}]}`, "input", codeInvalidValue},
		// Read by the create request's readers: what a create refuses.
		{`{"STEP":1}`, "STEP", "unknown_parameter"},
		{`{"step":1,"metadata":{` + manyKeys(17) + `}}`, "metadata", codeInvalidValue},
		{`{"step":1,"metadata":{"a":"` + strings.Repeat("x", 513) + `"}}`, "metadata.a", codeInvalidValue},
		{`{"step":1.5}`, "step", "invalid_type"},
	} {
		rp := ts.do("POST", "/v1/runs/"+qrun.ID+"/fork", tc.body)
		e := errorOf(t, rp)
		if rp.status != 400 || (tc.param != "" && (e.Param == nil || *e.Param != tc.param)) || e.Code == nil || *e.Code != tc.code {
			t.Errorf("fork %s: %d %s", tc.body, rp.status, rp.body)
		}
	}
	if n := countRuns(t, ts.store); n != runsBefore {
		t.Errorf("refused forks stored runs: %d, want %d", n, runsBefore)
	}

	if got := storeState(t, ts.store, run.ID); got != before {
		t.Errorf("the original run changed:\n%s\nwas:\n%s", got, before)
	}
	if err := store.Check(context.Background(), ts.store); err != nil {
		t.Fatalf("store.Check: %v", err)
	}
}

func TestFork_SQLite(t *testing.T) {
	testFork(t, newInspectServer(t, openSQLiteFile(t), nil))
}

func TestFork_Postgres(t *testing.T) {
	st, err := postgres.Open(context.Background(), pgtest.URL(), &postgres.Options{Schema: pgtest.Schema(t, "forktest")})
	if err != nil {
		t.Fatal(err)
	}
	testFork(t, newInspectServer(t, st, nil))
}

// TestFork_StreamAndBackground forks with stream:true (the fork's events
// as SSE from sequence 0 to its terminal event) and with background:true
// (the created Response at once), and cancels a background fork.
func TestFork_StreamAndBackground(t *testing.T) {
	ts := newInspectServer(t, openSQLiteFile(t), nil)
	orig := ts.createSync(`{"model":"demo.two-outputs","input":"x"}`)
	run := ts.runOf(orig["id"].(string))

	rp := ts.do("POST", "/v1/runs/"+run.ID+"/fork", `{"step":1,"stream":true}`)
	if rp.status != 200 || !strings.HasPrefix(rp.header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("stream fork: %d %s", rp.status, rp.body)
	}
	var seqs []int64
	var types []string
	for line := range strings.SplitSeq(rp.body, "\n") {
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var ev struct {
			Type string `json:"type"`
			Seq  int64  `json:"sequence_number"`
		}
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			t.Fatal(err)
		}
		seqs, types = append(seqs, ev.Seq), append(types, ev.Type)
	}
	if len(seqs) == 0 || types[0] != "response.created" || types[len(types)-1] != "response.completed" {
		t.Fatalf("stream fork events: %v", types)
	}
	for i, s := range seqs {
		if s != int64(i) {
			t.Fatalf("stream fork sequence numbers: %v", seqs)
		}
	}

	long := ts.createSync(`{"model":"demo.silent","input":"z","metadata":{"steps":"40"}}`)
	lrun := ts.runOf(long["id"].(string))
	rp = ts.do("POST", "/v1/runs/"+lrun.ID+"/fork", `{"step":1,"background":true,"metadata":{"step_delay_ms":"50"}}`)
	var bg map[string]any
	if rp.status != 200 || json.Unmarshal([]byte(rp.body), &bg) != nil || bg["status"] != "queued" && bg["status"] != "in_progress" {
		t.Fatalf("background fork: %d %s", rp.status, rp.body)
	}
	id := bg["id"].(string)
	if rp := ts.do("POST", "/v1/responses/"+id+"/cancel", ""); rp.status != 200 {
		t.Fatalf("cancel the fork: %d %s", rp.status, rp.body)
	}
	waitFor(t, "the fork's cancel", func() bool {
		r, err := ts.store.ResponseGet(context.Background(), id)
		return err == nil && r.Finished() && r.Status == store.StatusCancelled
	})
	if err := store.Check(context.Background(), ts.store); err != nil {
		t.Fatal(err)
	}
}

func FuzzParseFork(f *testing.F) {
	for _, s := range []string{`{"step":2}`, `{"step":0,"input":"hi","stream":true}`, `{"step":1,"input":[{"type":"function_call_output","call_id":"c","output":"x"}]}`,
		`{"step":-1}`, `{}`, ``, `{"step":1}{}`, `{"step":"1"}`, `{"step":1,"input":null,"metadata":{"a":"b"}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		p, err := parseFork(body, 0)
		if err != nil {
			if ae := toAPIError(err); ae.Status != 400 {
				t.Fatalf("%q: %+v", body, ae)
			}
			return
		}
		if p.Step < 0 {
			t.Fatalf("%q accepted with step %d", body, p.Step)
		}
	})
}

// TestResponseEvents pages through a response's log as JSON (one created
// without stream, which cannot be streamed) and checks it against the
// store, the owner's visibility and bad parameters.
func TestResponseEvents(t *testing.T) {
	ts := newInspectServer(t, openSQLiteFile(t), map[string]string{"key-a": "alice", "key-b": "bob"})
	a := ts.as("key-a")
	r := a.createSync(`{"model":"demo.two-outputs","input":"x"}`)
	id := r["id"].(string)
	want, err := ts.store.EventList(context.Background(), &store.EventListParams{ResponseID: id, After: -1})
	if err != nil {
		t.Fatal(err)
	}
	var got []eventView
	after := int64(-1)
	for page := 0; ; page++ {
		var l eventList
		a.getJSON(fmt.Sprintf("/v1/responses/%s/events?after=%d&limit=5", id, after), &l)
		got = append(got, l.Data...)
		if !l.HasMore {
			break
		}
		if len(l.Data) != 5 || page > 10 {
			t.Fatalf("page %d: %d events, has_more", page, len(l.Data))
		}
		after = l.Data[len(l.Data)-1].SequenceNumber
	}
	if len(got) != len(want) {
		t.Fatalf("%d events, the log has %d", len(got), len(want))
	}
	for i, ev := range got {
		var compact bytes.Buffer
		if err := json.Compact(&compact, want[i].Payload); err != nil {
			t.Fatal(err)
		}
		if ev.SequenceNumber != want[i].Seq || ev.Type != want[i].Type || ev.Step != want[i].Step || string(ev.Event) != compact.String() {
			t.Errorf("event %d: %+v, want %+v", i, ev, want[i])
		}
	}
	if rp := ts.as("key-b").do("GET", "/v1/responses/"+id+"/events", ""); rp.status != 404 {
		t.Errorf("bob reads alice's events: %d %s", rp.status, rp.body)
	}
	for _, q := range []string{"after=-2", "after=x", "limit=0", "limit=1001", "colour=red"} {
		if rp := a.do("GET", "/v1/responses/"+id+"/events?"+q, ""); rp.status != 400 {
			t.Errorf("%s: %d %s", q, rp.status, rp.body)
		}
	}
}
