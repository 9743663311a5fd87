package responses

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// rawRequest writes head (request line and headers, without the blank
// line) and body start on a fresh TCP connection, then, when trickle is
// set, one more byte of body every 20 ms until the connection fails (as
// a slowloris client does). It returns the reply's status and whether
// the server closed the connection after it (it said Connection: close,
// and did). A server that never replies fails the test after 30 s.
func (ts *testServer) rawRequest(t *testing.T, head, bodyStart string, trickle bool) (status int, closed bool) {
	t.Helper()
	conn, err := net.Dial("tcp", ts.srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, head+"\r\nHost: test\r\n\r\n"+bodyStart); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	stop := make(chan struct{})
	defer close(stop)
	if trickle {
		wg.Go(func() {
			tick := time.NewTicker(20 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-stop:
					return
				case <-tick.C:
					if _, err := conn.Write([]byte(" ")); err != nil {
						return
					}
				}
			}
		})
	}
	_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("%s: no reply: %v", head, err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if !resp.Close {
		return resp.StatusCode, false // Connection: keep-alive
	}
	// The server said it closes the connection: it must do so.
	if _, err := br.ReadByte(); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("%s: the server said Connection: close and kept the connection open (%v)", head, err)
	}
	return resp.StatusCode, true
}

// TestBodyTimeout_SlowBodies: request bodies that do not arrive within
// BodyTimeout — one stalled after its first byte, one trickled a byte at
// a time (Content-Length or chunked) — get a 408 and their connection
// closed; a route that never reads its body (cancel) replies and closes
// the connection too, instead of net/http waiting for the rest forever.
// (Before: such connections were held indefinitely.)
func TestBodyTimeout_SlowBodies(t *testing.T) {
	t.Parallel()
	st, _ := openSQLite(t, nil)
	ts := newTestServer(t, st, &Options{BodyTimeout: 200 * time.Millisecond})
	tests := []struct {
		name, head, body string
		trickle          bool
		status           int
	}{
		{"Stalled", "POST /v1/responses HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: 100", "{", false, 408},
		{"Trickled", "POST /v1/responses HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: 100000", `{"input":"`, true, 408},
		{"TrickledChunked", "POST /v1/responses HTTP/1.1\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked", "1\r\n{\r\n", false, 408},
		{"UnreadBody", "POST /v1/responses/resp_x/cancel HTTP/1.1\r\nContent-Length: 100", "{", false, 404},
		{"GetBody", "GET /v1/responses/resp_x HTTP/1.1\r\nContent-Length: 100", "{", true, 408},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			status, closed := ts.rawRequest(t, tt.head, tt.body, tt.trickle)
			if status != tt.status || !closed {
				t.Fatalf("reply %d, connection closed %v; want %d and closed", status, closed, tt.status)
			}
		})
	}
}

// TestBodyTimeout_SparesStreams: the body deadline ends with the body. A
// stream (created with a body, or a GET with openai-go's {"stream":true}
// body) that lasts far longer than BodyTimeout runs to its terminal
// event, and a body that arrives in time is served on a connection that
// stays open.
func TestBodyTimeout_SparesStreams(t *testing.T) {
	t.Parallel()
	st, _ := openSQLite(t, nil)
	ts := newTestServer(t, st, &Options{BodyTimeout: 50 * time.Millisecond})
	rp := ts.do("POST", "/v1/responses", `{"model":"demo.silent","input":"x","stream":true,"metadata":{"steps":"10","step_delay_ms":"40"}}`)
	if rp.status != 200 || !strings.Contains(rp.body, "event: response.completed") || !strings.HasSuffix(rp.body, "data: [DONE]\n\n") {
		t.Fatalf("create stream: %d %s", rp.status, rp.body)
	}
	id := ts.createStreamed(`{"model":"demo.silent","input":"x","stream":true,"background":true,"metadata":{"steps":"10","step_delay_ms":"40"}}`)
	ts.key = ""
	rp = ts.do("GET", "/v1/responses/"+id, `{"stream":true}`)
	if rp.status != 200 || !strings.Contains(rp.body, "event: response.completed") {
		t.Fatalf("GET stream with a body: %d %s", rp.status, rp.body)
	}
	const body = `{"model":"demo.echo","input":"hi","store":true}`
	status, closed := ts.rawRequest(t, fmt.Sprintf("POST /v1/responses HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: %d", len(body)), body, false)
	if status != 200 || closed {
		t.Fatalf("a body in time: %d, closed %v", status, closed)
	}
}
