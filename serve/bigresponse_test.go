package serve_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"io"
	"math/rand/v2"
	"net/http"
	"path/filepath"
	"testing"

	"github.com/superstep/superstep/internal/testkit/pgtest"

	"github.com/jackc/pgx/v5"
)

// bigText is n bytes of letters, spaces and the characters JSON encoders
// escape differently (", \n, <, >, &): the request's encoding of it (Go's,
// here) and the stored records' differ only where an encoder chooses to.
func bigText(n int) string {
	const alphabet = "abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyz      \"\n<>&"
	r := rand.New(rand.NewPCG(14, 6))
	b := make([]byte, n)
	for i := range b {
		b[i] = alphabet[r.IntN(len(alphabet))]
	}
	return string(b)
}

// TestBigResponse_StoredOnceReadsBack: through both stores, a 1 MiB echo
// (streamed, then not) reads back as it was sent live: the SSE replay
// byte for byte, GET the response of the terminal event and the
// non-streamed reply byte for byte, input_items the text sent. And the
// responses table holds the text about once (the request), not three
// times (request, recorded input, snapshot) as before issue 14 #6.
func TestBigResponse_StoredOnceReadsBack(t *testing.T) {
	t.Run("SQLite", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "big.db")
		checkBigResponse(t, path, func() int64 {
			db, err := sql.Open("sqlite3", "file:"+path+"?mode=ro")
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			var n int64
			// A long request and input are stored apart from the row
			// (response_bodies, schema version 19).
			err = db.QueryRow(`SELECT (SELECT sum(coalesce(length(request), 0) + coalesce(length(snapshot), 0) +
				coalesce(length(input), 0)) FROM responses) + (SELECT coalesce(sum(coalesce(length(request), 0) +
				coalesce(length(input), 0)), 0) FROM response_bodies)`).Scan(&n)
			if err != nil {
				t.Fatal(err)
			}
			return n
		})
	})
	t.Run("PostgreSQL", func(t *testing.T) {
		dbURL, schema := pgtest.SchemaURL(t, "bigresp")
		conn, err := pgx.Connect(t.Context(), dbURL)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(context.Background())
		checkBigResponse(t, dbURL, func() int64 {
			var n int64
			q := `SELECT sum(coalesce(octet_length(request), 0) + coalesce(octet_length(snapshot), 0) +
				coalesce(octet_length(input), 0)) FROM ` + pgx.Identifier{schema, "responses"}.Sanitize()
			if err := conn.QueryRow(t.Context(), q).Scan(&n); err != nil {
				t.Fatal(err)
			}
			return n
		})
	})
}

func checkBigResponse(t *testing.T, db string, responseBytes func() int64) {
	base, stop := startServer(t, db, 8<<20)
	defer stop()

	text := bigText(1 << 20)
	var sent int64
	for _, stream := range []bool{true, false} {
		body, err := json.Marshal(map[string]any{"model": "echo", "input": text, "stream": stream})
		if err != nil {
			t.Fatal(err)
		}
		sent += int64(len(body))
		live := httpDo(t, http.MethodPost, base+"/v1/responses", body)
		var id string
		var final []byte // the response as the client was shown it last
		if stream {
			completed := lastEvent(t, live, "response.completed")
			var ev struct {
				Response json.RawMessage `json:"response"`
			}
			if err := json.Unmarshal(completed, &ev); err != nil {
				t.Fatal(err)
			}
			final = ev.Response
			replay := httpDo(t, http.MethodGet, base+"/v1/responses/"+responseID(t, final)+"?stream=true", nil)
			if !bytes.Equal(replay, live) {
				t.Fatalf("stream=true: the replay (%d bytes) differs from the live stream (%d bytes)", len(replay), len(live))
			}
		} else {
			final = live
		}
		id = responseID(t, final)
		// A JSON reply ends with a newline; an SSE data line does not.
		got := bytes.TrimSuffix(httpDo(t, http.MethodGet, base+"/v1/responses/"+id, nil), []byte("\n"))
		final = bytes.TrimSuffix(final, []byte("\n"))
		if !bytes.Equal(got, final) {
			t.Fatalf("stream=%v: GET returned %d bytes that differ from the %d the client was shown", stream, len(got), len(final))
		}
		requireEchoed(t, got, text)
		var items struct {
			Data []struct {
				Content []struct {
					Text string `json:"text"`
				} `json:"content"`
			} `json:"data"`
		}
		if err := json.Unmarshal(httpDo(t, http.MethodGet, base+"/v1/responses/"+id+"/input_items", nil), &items); err != nil {
			t.Fatal(err)
		}
		if len(items.Data) != 1 || len(items.Data[0].Content) != 1 || items.Data[0].Content[0].Text != text {
			t.Fatalf("stream=%v: input_items do not hold the text sent", stream)
		}
	}
	// Each response stores its request (len(body)) and small columns; the
	// layout before stored the text three times (about 3.1 bytes per
	// request byte here).
	if n := responseBytes(); float64(n) > 1.2*float64(sent) {
		t.Fatalf("the responses table holds %d bytes of request, snapshot and input for %d request bytes (%.2f per byte), want at most 1.2",
			n, sent, float64(n)/float64(sent))
	}
}

// httpDo makes a request and returns the body of its 200 reply.
func httpDo(t testing.TB, method, url string, body []byte) []byte {
	t.Helper()
	var b bytes.Buffer
	send(t, method, url, body, &b)
	return b.Bytes()
}

// send makes a request and copies the body of its 200 reply to dst.
func send(t testing.TB, method, url string, body []byte, dst io.Writer) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		data, _ := io.ReadAll(resp.Body)
		t.Fatalf("%s %s: %d %.300s", method, url, resp.StatusCode, data)
	}
	if _, err := io.Copy(dst, resp.Body); err != nil {
		t.Fatal(err)
	}
}

// lastEvent returns the data of the last SSE event of type typ in stream.
func lastEvent(t *testing.T, stream []byte, typ string) []byte {
	t.Helper()
	var data []byte
	for _, frame := range bytes.Split(stream, []byte("\n\n")) {
		if bytes.HasPrefix(frame, []byte("event: "+typ+"\n")) {
			_, d, _ := bytes.Cut(frame, []byte("\ndata: "))
			data = d
		}
	}
	if data == nil {
		t.Fatalf("no %s event in the stream (%d bytes)", typ, len(stream))
	}
	return data
}

func responseID(t *testing.T, resp []byte) string {
	t.Helper()
	var r struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(resp, &r); err != nil || r.ID == "" {
		t.Fatalf("not a response (%v): %.200s", err, resp)
	}
	return r.ID
}

// requireEchoed fails unless resp, a Response object, is completed with
// text as its one output text.
func requireEchoed(t *testing.T, resp []byte, text string) {
	t.Helper()
	var r struct {
		Status string `json:"status"`
		Output []struct {
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
		} `json:"output"`
	}
	if err := json.Unmarshal(resp, &r); err != nil {
		t.Fatal(err)
	}
	if r.Status != "completed" || len(r.Output) != 1 || len(r.Output[0].Content) != 1 || r.Output[0].Content[0].Text != text {
		t.Fatalf("the response (status %s, %d outputs) does not echo the text", r.Status, len(r.Output))
	}
}
