package crash

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// leaseEndMsgs start the warnings a host logs when a run it drives stops
// because its lease ended without the process dying (host.classifyLeaseEnd):
// its superstep in flight runs again, here or elsewhere, as after a crash.
var leaseEndMsgs = []string{"host: lease expired", "host: lease lost", "host: run stopped: its lease ended"}

// leaseEnds counts, per response ID, the lease-end warnings in the JSON
// logs of the servers in dir (server-*.log).
func leaseEnds(t *testing.T, dir string) map[string]int {
	t.Helper()
	logs, err := filepath.Glob(filepath.Join(dir, "server-*.log"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, path := range logs {
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		countLeaseEnds(f, out)
		f.Close()
	}
	return out
}

// countLeaseEnds adds the lease-end warnings of the JSON log lines of r
// to out; other lines (text, or cut short by a kill) are skipped.
func countLeaseEnds(r io.Reader, out map[string]int) {
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if !bytes.Contains(line, []byte("lease")) {
			continue
		}
		var rec struct {
			Level      string `json:"level"`
			Msg        string `json:"msg"`
			ResponseID string `json:"response_id"`
		}
		if json.Unmarshal(line, &rec) != nil || rec.Level != "WARN" || rec.ResponseID == "" {
			continue
		}
		for _, m := range leaseEndMsgs {
			if strings.HasPrefix(rec.Msg, m) {
				out[rec.ResponseID]++
				break
			}
		}
	}
}

// TestCountLeaseEnds: the warnings of a lapsed or lost lease count for
// their response; the Info line of a lease end still being classified,
// other warnings and lines cut short by a kill do not.
func TestCountLeaseEnds(t *testing.T) {
	dir := t.TempDir()
	lines := []string{
		`{"time":"t","level":"WARN","msg":"host: lease expired while the run stalled; this host claimed the run again and resumes it from its last commit","run_id":"run_1","response_id":"resp_a","epoch":3}`,
		`{"time":"t","level":"WARN","msg":"host: lease lost; another owner drives the run now","run_id":"run_2","response_id":"resp_b"}`,
		`{"time":"t","level":"WARN","msg":"host: run stopped: its lease ended","run_id":"run_1","response_id":"resp_a"}`,
		`{"time":"t","level":"INFO","msg":"host: run stopped: its lease ended; the store could not be read to tell why, asking again","response_id":"resp_a"}`,
		`{"time":"t","level":"WARN","msg":"host: lease renewal failed; retrying","run_id":"run_3","response_id":"resp_c"}`,
		`{"time":"t","level":"WARN","msg":"host: lease expired (or was not renewed in time); the run is left`,
	}
	if err := os.WriteFile(filepath.Join(dir, "server-001.log"), []byte(strings.Join(lines, "\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "server-002.log"), []byte(lines[1]+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got := leaseEnds(t, dir)
	if len(got) != 2 || got["resp_a"] != 2 || got["resp_b"] != 2 {
		t.Fatalf("lease ends %v, want resp_a 2, resp_b 2", got)
	}
}
