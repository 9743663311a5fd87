package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
)

type hostsReply struct {
	Object string `json:"object"`
	Data   []struct {
		ID             string   `json:"id"`
		Addr           string   `json:"addr"`
		Runs           []string `json:"runs"`
		LeaseExpiresAt int64    `json:"lease_expires_at"`
	} `json:"data"`
}

func (e *env) hosts(t *testing.T) hostsReply {
	t.Helper()
	req, _ := http.NewRequest("GET", e.srv.URL+"/v1/hosts", nil)
	req.Header.Set("Authorization", "Bearer "+e.apiKey)
	resp, err := e.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body := readAll(t, resp)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /v1/hosts: %d %s", resp.StatusCode, body)
	}
	var out hostsReply
	if err := json.Unmarshal(body, &out); err != nil {
		t.Fatalf("GET /v1/hosts: %v in %s", err, body)
	}
	return out
}

// GET /v1/hosts lists this host with the runs it drives while they run,
// and without them once they finished.
func TestHosts_ListsRunsWhileTheyRun(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	r, err := e.client.Responses.New(context.Background(), responses.ResponseNewParams{
		Model: "demo.silent", Background: openai.Bool(true),
		Input:    responses.ResponseNewParamsInputUnion{OfString: openai.String("go")},
		Metadata: map[string]string{"steps": "50", "step_delay_ms": "20"},
	})
	if err != nil {
		t.Fatal(err)
	}
	got := e.hosts(t)
	if got.Object != "list" || len(got.Data) != 1 {
		t.Fatalf("hosts %+v, want one host", got)
	}
	if h := got.Data[0]; h.ID == "" || !slices.Contains(h.Runs, r.ID) || h.LeaseExpiresAt <= time.Now().Unix() {
		t.Fatalf("host %+v, want an id, run %s and a future lease expiry", h, r.ID)
	}
	if _, err := e.client.Responses.Cancel(context.Background(), r.ID); err != nil {
		t.Fatal(err)
	}
	e.waitTerminal(r.ID)
	deadline := time.Now().Add(20 * time.Second)
	for {
		got = e.hosts(t)
		if len(got.Data) == 1 && !slices.Contains(got.Data[0].Runs, r.ID) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("hosts %+v still list the finished run %s", got, r.ID)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
