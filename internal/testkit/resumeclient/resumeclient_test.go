package resumeclient_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"go.uber.org/goleak"

	"github.com/superstep/superstep/internal/testkit/resumeclient"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// logLen is the length of the fake response's log: response.created,
// deltas, response.completed.
const logLen = 8

// event returns the fake log's event seq as an SSE frame.
func event(seq int) string {
	typ, extra := "response.output_text.delta", `,"delta":"x"`
	switch seq {
	case 0:
		typ, extra = "response.created", `,"response":{"id":"resp_1","status":"queued"}`
	case logLen - 1:
		typ, extra = "response.completed", `,"response":{"id":"resp_1","status":"completed"}`
	}
	return fmt.Sprintf("event: %s\ndata: {\"type\":%q,\"sequence_number\":%d%s}\n\n", typ, typ, seq, extra)
}

// fakeServer serves the fake response's log: a create streams it from
// seq 0, a GET after starting_after. Each connection ends after cut
// events, as a kill would end it (no [DONE]); cut < 0 never cuts.
func fakeServer(t *testing.T, createCut, getCut int) *httptest.Server {
	serve := func(w http.ResponseWriter, from, cut int) {
		w.Header().Set("Content-Type", "text/event-stream")
		for seq, n := from, 0; seq < logLen; seq, n = seq+1, n+1 {
			if n == cut {
				panic(http.ErrAbortHandler) // the connection breaks mid-stream
			}
			fmt.Fprint(w, event(seq))
			w.(http.Flusher).Flush()
		}
		fmt.Fprint(w, "data: [DONE]\n\n")
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/responses", func(w http.ResponseWriter, _ *http.Request) { serve(w, 0, createCut) })
	mux.HandleFunc("GET /v1/responses/{id}", func(w http.ResponseWriter, r *http.Request) {
		if r.PathValue("id") != "resp_1" {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprint(w, `{"error":{"message":"no such response","type":"invalid_request_error"}}`)
			return
		}
		from := 0
		if s := r.URL.Query().Get("starting_after"); s != "" {
			after, err := strconv.Atoi(s)
			if err != nil {
				t.Errorf("starting_after %q", s)
			}
			from = after + 1
		}
		serve(w, from, getCut)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// hosts returns a Host function over urls that takes the first one not
// avoided.
func hosts(urls ...string) func(context.Context, string) (string, error) {
	return func(_ context.Context, avoid string) (string, error) {
		for _, u := range urls {
			if u != avoid {
				return u, nil
			}
		}
		return urls[0], nil
	}
}

// seqs returns the sequence numbers a stream received.
func seqs(st *resumeclient.Stream) string {
	var b strings.Builder
	for _, e := range st.View.Events {
		fmt.Fprintf(&b, "%d ", e.Seq)
	}
	return strings.TrimSpace(b.String())
}

// A client whose every connection is cut resumes from its last event on
// another host each time and ends with the whole log, once.
func TestStream_ResumesAcrossCuts(t *testing.T) {
	a, b := fakeServer(t, 3, 2), fakeServer(t, 3, 2)
	var ids []string
	deltas := 0
	st := &resumeclient.Stream{Name: "c", Host: hosts(a.URL, b.URL), OnID: func(id string) { ids = append(ids, id) },
		OnEvent: func(typ string) {
			if typ == "response.output_text.delta" {
				deltas++
			}
		}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := st.Create(ctx, resumeclient.NewParams("w", "demo.silent", "", nil, 5)); err != nil {
		t.Fatal(err)
	}
	if st.ID != "resp_1" || st.Terminal || st.LastErr == nil || st.Last() != 2 {
		t.Fatalf("after the cut create: id %q terminal %v last %d err %v", st.ID, st.Terminal, st.Last(), st.LastErr)
	}
	if err := st.Follow(ctx); err != nil {
		t.Fatal(err)
	}
	if got := seqs(st); got != "0 1 2 3 4 5 6 7" || !st.Terminal {
		t.Fatalf("received %s, terminal %v", got, st.Terminal)
	}
	if fmt.Sprint(st.View.ResumedAt) != "[2 4 6]" || st.Retries != 3 || st.Switches != 3 {
		t.Errorf("resumed at %v, %d retries, %d switches; want [2 4 6], 3, 3", st.View.ResumedAt, st.Retries, st.Switches)
	}
	if len(ids) != 1 || deltas != logLen-2 {
		t.Errorf("OnID calls %v, OnEvent deltas %d", ids, deltas)
	}
	if v := st.ClientView(); v.Name != "c" || len(v.Events) != logLen {
		t.Errorf("ClientView %+v", v)
	}
}

// Run creates and follows to the end; a create cut before
// response.created is an error.
func TestStream_Run(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	srv := fakeServer(t, 2, -1)
	st := &resumeclient.Stream{Host: hosts(srv.URL)}
	if err := st.Run(ctx, resumeclient.NewParams("w", "m", "", nil, 0)); err != nil || !st.Terminal || seqs(st) != "0 1 2 3 4 5 6 7" {
		t.Fatalf("Run: %v, received %s", err, seqs(st))
	}
	cut := &resumeclient.Stream{Name: "cut", Host: hosts(fakeServer(t, 0, -1).URL)}
	if err := cut.Run(ctx, resumeclient.NewParams("w", "m", "", nil, 0)); err == nil || !strings.Contains(err.Error(), "before response.created") {
		t.Fatalf("Run with the create cut at once: %v", err)
	}
}

// A clean end before the terminal event (a cursor at the end of the log)
// ends Follow without an error; a 4xx reply is an error.
func TestStream_Follow_EndsAndFails(t *testing.T) {
	srv := fakeServer(t, -1, -1)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st := &resumeclient.Stream{Host: hosts(srv.URL), ID: "resp_1"}
	st.View.StartAt = logLen
	if err := st.Follow(ctx); err != nil || len(st.View.Events) != 0 || st.Terminal {
		t.Fatalf("follow at the end: %v, %d events", err, len(st.View.Events))
	}
	bad := &resumeclient.Stream{Name: "bad", Host: hosts(srv.URL), ID: "resp_missing"}
	err := bad.Follow(ctx)
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusNotFound || !strings.Contains(err.Error(), "bad") {
		t.Fatalf("follow of a missing response: %v", err)
	}
	gone := &resumeclient.Stream{Host: hosts(srv.URL), ID: "resp_1"}
	ended, stop := context.WithCancel(ctx)
	stop()
	if err := gone.Follow(ended); !errors.Is(err, context.Canceled) {
		t.Fatalf("follow with an ended context: %v", err)
	}
}

// A 401 is another test's server on a port one of ours had: the create
// and the follow ask Host for another server instead of failing.
func TestStream_WrongServerRetried(t *testing.T) {
	var posts, gets atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			posts.Add(1)
		} else {
			gets.Add(1)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprint(w, `{"error":{"message":"invalid API key","type":"invalid_request_error","code":"invalid_api_key"}}`)
	}))
	t.Cleanup(other.Close)
	ours := fakeServer(t, 3, -1)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st := &resumeclient.Stream{Name: "c", Host: hosts(other.URL, ours.URL)}
	if err := st.Run(ctx, resumeclient.NewParams("w", "m", "", nil, 0)); err != nil {
		t.Fatalf("Run with a wrong server first: %v", err)
	}
	if got := seqs(st); got != "0 1 2 3 4 5 6 7" || !st.Terminal {
		t.Fatalf("received %s, terminal %v", got, st.Terminal)
	}
	if posts.Load() != 1 {
		t.Errorf("the wrong server saw %d creates; want 1 (then the create went elsewhere)", posts.Load())
	}
	// Follow, first sent to the wrong server, goes on elsewhere (Run's
	// follow after the cut create did too: its Host avoided ours).
	gets.Store(0)
	follow := &resumeclient.Stream{Name: "f", ID: "resp_1", Host: hosts(other.URL, ours.URL)}
	if err := follow.Follow(ctx); err != nil || !follow.Terminal || gets.Load() != 1 {
		t.Fatalf("Follow: %v, terminal %v, %d GETs on the wrong server", err, follow.Terminal, gets.Load())
	}
}

// A pair's reader joins where the primary's cut stream ended; with the
// primary at the terminal event it joins one before, and also runs.
func TestPair_Run(t *testing.T) {
	for _, tc := range []struct {
		createCut   int
		cursor      int64
		wantStartAt int64
	}{
		{createCut: 4, cursor: -2, wantStartAt: 4},
		{createCut: 4, cursor: -1, wantStartAt: 0},
		{createCut: 4, cursor: 9, wantStartAt: 4},
		{createCut: -1, cursor: -2, wantStartAt: logLen - 1},
	} {
		srv := fakeServer(t, tc.createCut, -1)
		p := &resumeclient.Pair{Primary: &resumeclient.Stream{Name: "p", Host: hosts(srv.URL)},
			Reader: &resumeclient.Stream{Name: "r", Host: hosts(srv.URL)}, Cursor: tc.cursor}
		alsoID := ""
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := p.Run(ctx, resumeclient.NewParams("w", "m", "", nil, 0), func(_ context.Context, id string) error {
			alsoID = id
			return errors.New("also failed")
		})
		cancel()
		if err == nil || !strings.Contains(err.Error(), "also failed") || alsoID != "resp_1" {
			t.Errorf("cut %d cursor %d: Run %v, also saw %q", tc.createCut, tc.cursor, err, alsoID)
		}
		if p.Reader.View.StartAt != tc.wantStartAt || !p.Primary.Terminal || !p.Reader.Terminal ||
			seqs(p.Primary) != "0 1 2 3 4 5 6 7" {
			t.Errorf("cut %d cursor %d: reader StartAt %d (want %d), primary %s, terminal %v %v", tc.createCut, tc.cursor,
				p.Reader.View.StartAt, tc.wantStartAt, seqs(p.Primary), p.Primary.Terminal, p.Reader.Terminal)
		}
		if v := resumeclient.ViewsByID(p.Streams()...)["resp_1"]; len(v) != 2 || v[0].Name != "p" || v[1].Name != "r" {
			t.Errorf("views %+v", v)
		}
	}
}

func TestNewParams(t *testing.T) {
	p := resumeclient.NewParams("w1", "demo.fanout", "", map[string]string{"workers": "3"}, 25)
	if p.Model != "demo.fanout" || p.Input.OfString.Value != "hello" || !p.Background.Value || !p.Store.Value {
		t.Fatalf("params %+v", p)
	}
	if p.Metadata["workload"] != "w1" || p.Metadata["step_delay_ms"] != "25" || p.Metadata["workers"] != "3" {
		t.Fatalf("metadata %v", p.Metadata)
	}
	if p := resumeclient.NewParams("w", "m", "text", nil, 0); p.Input.OfString.Value != "text" {
		t.Fatalf("input %q", p.Input.OfString.Value)
	}
}

func TestFatalHTTP(t *testing.T) {
	for code, fatal := range map[int]bool{400: true, 401: false, 404: true, 499: true, 500: false, 503: false} {
		err := &openai.Error{StatusCode: code}
		if got := resumeclient.FatalHTTP(fmt.Errorf("wrapped: %w", err)) != nil; got != fatal {
			t.Errorf("status %d: fatal %v", code, got)
		}
	}
	if resumeclient.FatalHTTP(errors.New("connection reset")) != nil || resumeclient.FatalHTTP(nil) != nil {
		t.Error("a connection error is fatal")
	}
}

// ViewsByID groups views by response and leaves out streams without one.
func TestViewsByID(t *testing.T) {
	a := &resumeclient.Stream{Name: "a", ID: "r1"}
	b := &resumeclient.Stream{Name: "b", ID: "r2"}
	c := &resumeclient.Stream{Name: "c", ID: "r1"}
	cut := &resumeclient.Stream{Name: "cut"}
	got := resumeclient.ViewsByID(a, nil, b, cut, c)
	if len(got) != 2 || len(got["r1"]) != 2 || got["r1"][1].Name != "c" || len(got["r2"]) != 1 {
		t.Fatalf("ViewsByID: %+v", got)
	}
}
