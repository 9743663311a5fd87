package responses

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/superstep/superstep/store"
)

// openStream starts a streaming request with key and returns the reply
// once its first event arrived (the stream is open), or the refusal.
func (ts *testServer) openStream(method, path, body, key string) (*http.Response, reply) {
	ts.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, ts.srv.URL+path, rd)
	if err != nil {
		ts.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := ts.http.Do(req)
	if err != nil {
		ts.t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return nil, reply{status: resp.StatusCode, header: resp.Header, body: string(b)}
	}
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "event: ") {
		ts.t.Fatalf("stream %s %s: first line %q, %v", method, path, line, err)
	}
	ts.t.Cleanup(func() { resp.Body.Close() })
	return resp, reply{status: 200}
}

// requireTooManyStreams requires the 429 of a stream cap: an
// OpenAI-format error the SDKs retry after Retry-After.
func requireTooManyStreams(t *testing.T, what string, rp reply) {
	t.Helper()
	if rp.status != http.StatusTooManyRequests || rp.header.Get("Retry-After") == "" || rp.header.Get("X-Should-Retry") == "false" {
		t.Fatalf("%s: %d %v %s; want 429 with Retry-After", what, rp.status, rp.header, rp.body)
	}
	if e := errorOf(t, rp); e.Code == nil || *e.Code != codeTooManyStreams || e.Type != typeRateLimit {
		t.Fatalf("%s: error %+v", what, e)
	}
}

// countResponses counts the runs in the store (one per created response here).
func countRuns(t *testing.T, st store.Store) int {
	t.Helper()
	runs, err := st.RunList(context.Background(), &store.RunListParams{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	return len(runs)
}

// TestStreams_CapPerKeyAndTotal: with MaxStreamsPerKey 2 and MaxStreams
// 3, a key's third stream (create or GET) is a 429 too_many_streams, and
// a refused create stores nothing; another key still streams until the
// total is reached; non-streaming requests are not limited; a stream that
// ends frees its slot. (Before, streams were not capped: 40 stalled
// readers pinned 2.3 GB.)
func TestStreams_CapPerKeyAndTotal(t *testing.T) {
	t.Parallel()
	st, _ := openSQLite(t, nil)
	ts := newTestServer(t, st, &Options{MaxStreams: 3, MaxStreamsPerKey: 2,
		APIKeys: map[string]string{"ka": "alice", "kb": "bob", "kc": "carol"}})
	const long = `{"model":"demo.silent","input":"x","stream":true,"metadata":{"steps":"900","step_delay_ms":"50"}}`
	ts.key = "ka"
	id := ts.createStreamed(`{"model":"demo.echo","input":"hi","stream":true}`)
	a1, _ := ts.openStream("POST", "/v1/responses", long, "ka")
	_, _ = ts.openStream("POST", "/v1/responses", long, "ka")
	runs := countRuns(t, st)
	_, rp := ts.openStream("POST", "/v1/responses", long, "ka")
	requireTooManyStreams(t, "alice's third create", rp)
	if n := countRuns(t, st); n != runs {
		t.Fatalf("a refused streaming create stored a response: %d runs, want %d", n, runs)
	}
	_, rp = ts.openStream("GET", "/v1/responses/"+id+"?stream=true", "", "ka")
	requireTooManyStreams(t, "alice's third stream (GET)", rp)
	if rp := ts.do("GET", "/v1/responses/"+id, ""); rp.status != 200 {
		t.Fatalf("a GET without stream was limited: %d %s", rp.status, rp.body)
	}
	_, _ = ts.openStream("POST", "/v1/responses", long, "kb")
	_, rp = ts.openStream("POST", "/v1/responses", long, "kc")
	requireTooManyStreams(t, "carol's stream past the total", rp)
	a1.Body.Close() // the handler notices, ends the stream and frees the slot
	waitFor(t, "alice's slot to free", func() bool {
		resp, rp := ts.openStream("GET", "/v1/responses/"+id+"?stream=true", "", "ka")
		if resp != nil {
			resp.Body.Close()
		}
		return rp.status == 200
	})
}

// TestStreamLimiter counts per owner only when asked, and a release
// gives back exactly one slot however often it is called.
func TestStreamLimiter(t *testing.T) {
	t.Parallel()
	l := newStreamLimiter(3, 1)
	r1, ae := l.acquire("a", true)
	if ae != nil {
		t.Fatal(ae)
	}
	if _, ae := l.acquire("a", true); ae == nil {
		t.Fatal("a's second stream accepted past the per-key cap of 1")
	}
	r2, ae := l.acquire("a", false) // auth off: only the total counts
	if ae != nil {
		t.Fatal(ae)
	}
	r3, ae := l.acquire("b", true)
	if ae != nil {
		t.Fatal(ae)
	}
	if _, ae := l.acquire("c", true); ae == nil {
		t.Fatal("a stream accepted past the total cap of 3")
	}
	r1()
	r1()
	if l.total != 2 || l.byOwner["a"] != 0 {
		t.Fatalf("after a double release: total %d, a %d", l.total, l.byOwner["a"])
	}
	r2()
	r3()
	if l.total != 0 || len(l.byOwner) != 0 {
		t.Fatalf("after every release: total %d, owners %v", l.total, l.byOwner)
	}
	if _, ae := newStreamLimiter(0, 0).acquire("a", true); ae != nil {
		t.Fatal("no caps refused a stream")
	}
}
