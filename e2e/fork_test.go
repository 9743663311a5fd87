package e2e

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"

	"github.com/superstep/superstep/store"
	"github.com/superstep/superstep/store/sqlite"
)

// TestBinary_ForkAfterKill SIGKILLs a `superstep serve` on SQLite while a
// run is mid-way (step 3 of 9 committed), starts a new server on the same
// file and forks the run from step 2 there: the fork ends with the output
// the original ends with once the new server resumed it, the original's
// step-2 checkpoint is as it was before the kill, and the file passes
// store.Check.
func TestBinary_ForkAfterKill(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "fork.db")
	p := startServer(t, nil, "--db", db, "--keep-checkpoints", "-1")
	ctx := context.Background()
	c1 := p.client("k")
	created, err := c1.Responses.New(ctx, responses.ResponseNewParams{Model: "demo.silent", Input: textInput("go"),
		Background: openai.Bool(true), Metadata: shared.Metadata{"steps": "8", "step_delay_ms": "150"}})
	if err != nil {
		t.Fatal(err)
	}
	var runs struct {
		Data []struct {
			ID       string `json:"id"`
			LastStep int64  `json:"last_step"`
		} `json:"data"`
	}
	deadline := time.Now().Add(time.Minute)
	for len(runs.Data) == 0 || runs.Data[0].LastStep < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("run of %s not at step 3 within a minute: %+v", created.ID, runs)
		}
		time.Sleep(10 * time.Millisecond)
		httpJSON(t, "GET", p.baseURL+"/v1/runs?response_id="+created.ID, "", &runs)
	}
	runID := runs.Data[0].ID
	step2 := checkpointOf(t, p.baseURL, runID, 2)
	p.kill()

	p2 := startServer(t, nil, "--db", db, "--keep-checkpoints", "-1")
	var fork struct {
		ID     string `json:"id"`
		Status string `json:"status"`
	}
	httpJSON(t, "POST", p2.baseURL+"/v1/runs/"+runID+"/fork", `{"step":2}`, &fork)
	c2 := p2.client("k")
	forked := pollTerminal(t, c2, fork.ID)
	orig := pollTerminal(t, c2, created.ID)
	if forked.Status != "completed" || orig.Status != "completed" || forked.OutputText() != "done after 8" || orig.OutputText() != forked.OutputText() {
		t.Fatalf("fork %s %q, original %s %q", forked.Status, forked.OutputText(), orig.Status, orig.OutputText())
	}
	if got := checkpointOf(t, p2.baseURL, runID, 2); got != step2 {
		t.Fatalf("the original's step-2 checkpoint changed: %s, was %s", got, step2)
	}
	if code := p2.stop(t, syscall.SIGTERM); code != 0 {
		t.Fatalf("exit code %d:\n%s", code, p2.stderr)
	}
	st, err := sqlite.Open(ctx, db, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := store.Check(ctx, st); err != nil {
		t.Fatalf("store.Check: %v", err)
	}
	resp, err := st.ResponseGet(ctx, fork.ID)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.RunInfo(ctx, resp.RunID)
	if err != nil || info.ForkedFrom == nil || *info.ForkedFrom != (store.ForkPoint{RunID: runID, Step: 2}) {
		t.Fatalf("fork lineage: %+v %v", info, err)
	}
}

// checkpointOf returns the entry of step in GET /v1/runs/{id}/checkpoints,
// as JSON.
func checkpointOf(t *testing.T, base, runID string, step int64) string {
	t.Helper()
	var list struct {
		Data []json.RawMessage `json:"data"`
	}
	httpJSON(t, "GET", base+"/v1/runs/"+runID+"/checkpoints", "", &list)
	for _, raw := range list.Data {
		var c struct {
			Step int64 `json:"step"`
		}
		if json.Unmarshal(raw, &c) == nil && c.Step == step {
			return string(raw)
		}
	}
	t.Fatalf("run %s has no checkpoint %d: %d listed", runID, step, len(list.Data))
	return ""
}

// httpJSON sends a request, requires 200 and decodes the reply into out.
func httpJSON(t *testing.T, method, url, body string, out any) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := (&http.Client{Timeout: time.Minute, Transport: &http.Transport{DisableKeepAlives: true}}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b := readAll(t, resp)
	if resp.StatusCode != 200 {
		t.Fatalf("%s %s: %d %s", method, url, resp.StatusCode, b)
	}
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatalf("%s %s: %v: %s", method, url, err, b)
	}
}
