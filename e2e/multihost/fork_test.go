package multihost

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/superstep/superstep/store"
)

// forkRun is the run TestMultihost_ForkAfterKill forks: eight silent
// steps of 150 ms, then "done after 8".
var forkRun = config{name: "fork-silent-8", model: "demo.silent", meta: map[string]string{"steps": "8"}}

// TestMultihost_ForkAfterKill SIGKILLs the host driving a run once it
// committed step 3, forks the run from step 2 through another host (while
// the original's lease has not even expired), and requires the fork to end
// as the original does once a third host took it over, the original's
// step-2 checkpoint unchanged, the fork's lineage recorded and the
// database consistent (store.Check and `superstep check`).
func TestMultihost_ForkAfterKill(t *testing.T) {
	cl := newCluster(t, seedOf(t), "--lease", "1500ms", "--keep-checkpoints", "-1")
	st := openStore(t, cl.db)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cl.startAll(ctx)

	c := newClient(cl.host(0).url())
	resp, err := c.Responses.New(ctx, forkRun.params(150))
	if err != nil {
		t.Fatal(err)
	}
	rec, err := st.ResponseGet(ctx, resp.ID)
	if err != nil {
		t.Fatal(err)
	}
	run := waitRun(ctx, t, st, rec.RunID, "to step 3", func(r *store.Run) bool { return r.LastStep >= 3 })
	owner := cl.byID(run.Lease.Owner)
	if owner == nil {
		t.Fatalf("run %s is owned by %q, not a host of the cluster", run.ID, run.Lease.Owner)
	}
	before, err := st.CheckpointGet(ctx, run.ID, 2)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.kill(owner.slot); err != nil {
		t.Fatal(err)
	}
	other := cl.host((owner.slot + 1) % hostCount)

	// The fork, driven by another host, waited for to its end.
	body := fork(ctx, t, other.url(), run.ID, `{"step":2}`)
	var forked struct {
		ID     string `json:"id"`
		Status string `json:"status"`
	}
	if err := json.Unmarshal(body, &forked); err != nil || forked.Status != "completed" {
		t.Fatalf("fork: %v %s", err, body)
	}
	frec, err := st.ResponseGet(ctx, forked.ID)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.(store.RunInspector).RunInfo(ctx, frec.RunID)
	if err != nil {
		t.Fatal(err)
	}
	if info.ForkedFrom == nil || *info.ForkedFrom != (store.ForkPoint{RunID: run.ID, Step: 2}) || info.LastStep != 9 {
		t.Fatalf("fork run: %+v (forked from %+v)", info, info.ForkedFrom)
	}

	// The original, taken over once its lease expired, ends alike.
	waitResponse(ctx, t, st, resp.ID, "finished", func(r *store.Response) bool { return r.Finished() })
	orig, err := st.ResponseGet(ctx, resp.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := texts(t, frec.Snapshot), texts(t, orig.Snapshot); !slices.Equal(got, want) || !slices.Equal(want, []string{"done after 8"}) {
		t.Fatalf("fork output %q, original %q", got, want)
	}
	// The original's supersteps name the dead owner up to the kill, and
	// its successor, at a later epoch, after the takeover.
	var detail struct {
		Supersteps []struct {
			Step  int64   `json:"step"`
			Epoch *int64  `json:"epoch"`
			Host  *string `json:"host"`
		} `json:"supersteps"`
		LeaseHistory []struct {
			Epoch int64  `json:"epoch"`
			Owner string `json:"owner"`
		} `json:"lease_history"`
	}
	if err := json.Unmarshal(get(ctx, t, other.url(), "/v1/runs/"+run.ID), &detail); err != nil {
		t.Fatal(err)
	}
	if n := len(detail.LeaseHistory); n < 2 || detail.LeaseHistory[0].Owner != owner.id || detail.LeaseHistory[n-1].Owner == owner.id {
		t.Fatalf("lease history: %+v (killed %s)", detail.LeaseHistory, owner.id)
	}
	for _, ss := range detail.Supersteps {
		if ss.Epoch == nil || ss.Host == nil || ss.Step <= 3 && (*ss.Host != owner.id || *ss.Epoch != run.Lease.Epoch) ||
			ss.Step == 9 && (*ss.Host == owner.id || *ss.Epoch <= run.Lease.Epoch) {
			t.Errorf("superstep %d: epoch %v host %v (killed %s at epoch %d)", ss.Step, ss.Epoch, ss.Host, owner.id, run.Lease.Epoch)
		}
	}
	after, err := st.CheckpointGet(ctx, run.ID, 2)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(after.Parts) != fmt.Sprint(before.Parts) || after.ParentStep != before.ParentStep {
		t.Fatal("the original's step-2 checkpoint changed")
	}
	if err := store.Check(ctx, st); err != nil {
		t.Fatalf("store.Check: %v", err)
	}
	if err := cl.stopAll(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	cl.checkCommand(ctx)
}

// fork POSTs a fork to base and returns the reply's body, requiring 200.
func fork(ctx context.Context, t *testing.T, base, runID, body string) []byte {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/runs/"+runID+"/fork", bytes.NewBufferString(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+apiKey)
	resp, err := httpClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("fork %s from %s: %d %v %s", runID, base, resp.StatusCode, err, b)
	}
	return b
}

// get GETs path from base and returns the reply's body, requiring 200.
func get(ctx context.Context, t *testing.T, base, path string) []byte {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+apiKey)
	resp, err := httpClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s%s: %d %v %s", base, path, resp.StatusCode, err, b)
	}
	return b
}

// texts returns the output texts of a Response object.
func texts(t *testing.T, snapshot []byte) []string {
	t.Helper()
	var r struct {
		Output []struct {
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
		} `json:"output"`
	}
	if err := json.Unmarshal(snapshot, &r); err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	var out []string
	for _, o := range r.Output {
		for _, c := range o.Content {
			out = append(out, c.Text)
		}
	}
	return out
}
