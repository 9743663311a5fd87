package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/superstep/superstep/internal/testkit/proctest"
)

// guideFile marks the code block after it as the copy of a repository file.
var guideFile = regexp.MustCompile(`^<!-- file: (\S+) -->$`)

// guideBlocks returns the code blocks of docs/guide.md by the file each
// is a copy of; a block without a file marker fails the test.
func guideBlocks(t *testing.T) map[string]string {
	t.Helper()
	md, err := os.ReadFile("../../docs/guide.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := map[string]string{}
	lines := strings.Split(string(md), "\n")
	for i := 0; i < len(lines); i++ {
		if !strings.HasPrefix(lines[i], "```") {
			continue
		}
		var m []string
		if i > 0 {
			m = guideFile.FindStringSubmatch(lines[i-1])
		}
		start := i + 1
		for i++; i < len(lines) && lines[i] != "```"; i++ {
		}
		if m == nil {
			t.Errorf("docs/guide.md:%d: a code block without a <!-- file: ... --> line before it", start)
			continue
		}
		if _, dup := blocks[m[1]]; dup {
			t.Errorf("docs/guide.md:%d: %s shown twice", start, m[1])
		}
		blocks[m[1]] = strings.Join(lines[start:i], "\n") + "\n"
	}
	return blocks
}

// TestGuide_BlocksAreFiles: every code block of the guide is a file of
// examples/guide, byte for byte, and every program and script there is in
// the guide.
func TestGuide_BlocksAreFiles(t *testing.T) {
	blocks := guideBlocks(t)
	for path, block := range blocks {
		if !strings.HasPrefix(path, "examples/guide/") {
			t.Errorf("guide block %s: not a file of examples/guide", path)
			continue
		}
		file, err := os.ReadFile(filepath.Join("../..", path))
		if err != nil {
			t.Errorf("guide block %s: %v", path, err)
			continue
		}
		if string(file) != block {
			t.Errorf("guide block %s differs from the file:\n--- guide\n%s--- file\n%s", path, block, file)
		}
	}
	for _, pattern := range []string{"*.go", "*.sh", "client/*.go"} {
		files, _ := filepath.Glob(pattern)
		for _, f := range files {
			if !strings.HasSuffix(f, "_test.go") && blocks["examples/guide/"+f] == "" {
				t.Errorf("examples/guide/%s is not in docs/guide.md", f)
			}
		}
	}
}

// TestGuide_Imports: the guide's workflow code imports neither the host
// nor the server package; only main.go wires the server.
func TestGuide_Imports(t *testing.T) {
	files, _ := filepath.Glob("*.go")
	client, _ := filepath.Glob("client/*.go")
	for _, f := range append(files, client...) {
		parsed, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range parsed.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			switch {
			case path == "github.com/superstep/superstep/host":
				t.Errorf("%s imports host", f)
			case path == "github.com/superstep/superstep/serve" && f != "main.go":
				t.Errorf("%s imports serve: only main.go wires the server", f)
			}
		}
	}
}

// sse is the events of one curl stream.
type sse struct {
	types []string
	seqs  []int64
	last  map[string]any // the last event
}

// readSSE reads an SSE stream's data lines, calling each (if not nil)
// with every event; it returns at the stream's end.
func readSSE(t *testing.T, sc *bufio.Scanner, each func(ev map[string]any)) *sse {
	t.Helper()
	s := &sse{}
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var ev map[string]any
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			t.Fatalf("event %q: %v", data, err)
		}
		s.types = append(s.types, ev["type"].(string))
		s.seqs = append(s.seqs, int64(ev["sequence_number"].(float64)))
		s.last = ev
		if each != nil {
			each(ev)
		}
	}
	return s
}

// script runs examples/guide/<name> with sh against base and returns its
// output.
func script(t *testing.T, base, name string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", append([]string{name}, args...)...)
	cmd.Env = append(os.Environ(), "BASE="+base)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
	return out
}

// response is the part of a Response JSON object the test reads.
type response struct {
	ID     string `json:"id"`
	Status string `json:"status"`
	Output []struct {
		Type    string `json:"type"`
		Name    string `json:"name"`
		CallID  string `json:"call_id"`
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
	} `json:"output"`
}

func decodeResponse(t *testing.T, b []byte) *response {
	t.Helper()
	var r response
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("response %s: %v", b, err)
	}
	return &r
}

// texts returns the output messages' texts, one per message.
func (r *response) texts() []string {
	var out []string
	for _, it := range r.Output {
		for _, c := range it.Content {
			out = append(out, c.Text)
		}
	}
	return out
}

// approvalCall returns the call_id of r's approval request.
func (r *response) approvalCall(t *testing.T) string {
	t.Helper()
	if r.Status != "completed" || len(r.Output) != 1 || r.Output[0].Type != "function_call" || r.Output[0].Name != "approval" {
		t.Fatalf("response %+v: want completed with the approval's function_call", r)
	}
	return r.Output[0].CallID
}

var listening = regexp.MustCompile(`listening on http://(127\.0\.0\.1:\d+)`)

// TestGuide_Run builds the guide's program and does what the guide does:
// curl, the openai-go client (a streamed request), then a background
// response whose server is SIGKILLed while the writer writes, restarted on
// the same database, resumed with starting_after, and approved.
func TestGuide_Run(t *testing.T) {
	dir := t.TempDir()
	bin, client := filepath.Join(dir, "announce"), filepath.Join(dir, "client")
	if err := proctest.Build(t.Context(), ".", bin, proctest.RaceEnabled); err != nil {
		t.Fatal(err)
	}
	if err := proctest.Build(t.Context(), "./client", client, false); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(dir, "guide.db")
	start := func(name string) *proctest.Proc {
		t.Helper()
		p, err := proctest.Start(t.Context(), &proctest.Options{Bin: bin, AddrPattern: listening,
			Env: []string{"ADDR=127.0.0.1:0", "DB=" + db, "MODEL_SERVER="}, LogPath: filepath.Join(dir, name+".log")})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	p := start("first")
	posts := []string{"blog: Echo: our durable workflow server", "social: Echo: our durable workflow server. #announce"}

	// Step 4: curl.
	asked := decodeResponse(t, script(t, p.URL(), "ask.sh"))
	done := decodeResponse(t, script(t, p.URL(), "approve.sh", asked.ID, asked.approvalCall(t)))
	if done.Status != "completed" || strings.Join(done.texts(), "|") != strings.Join(posts, "|") {
		t.Fatalf("approved with curl: %s %q, want completed %q", done.Status, done.texts(), posts)
	}

	// Step 5: openai-go, streaming.
	cmd := exec.CommandContext(t.Context(), client)
	cmd.Env = append(os.Environ(), "BASE_URL="+p.URL()+"/v1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("client: %v\n%s", err, out)
	}
	want := "event: response.created\nevent: response.in_progress\n"
	tail := "approval asked: {\"draft\":\"Echo: our durable workflow server\"}\nstatus: completed\n" + strings.Join(posts, "\n") + "\n"
	if !strings.HasPrefix(string(out), want) || !strings.HasSuffix(string(out), "event: response.completed\n"+tail) {
		t.Fatalf("client output:\n%s\nwant it to start with\n%s and end with\n%s", out, want, tail)
	}

	// Step 6: kill -9 mid-run, restart, resume.
	bg := exec.CommandContext(t.Context(), "sh", "background.sh")
	bg.Env = append(os.Environ(), "BASE="+p.URL())
	stdout, err := bg.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := bg.Start(); err != nil {
		t.Fatal(err)
	}
	var id string
	first := readSSE(t, bufio.NewScanner(stdout), func(ev map[string]any) {
		if ev["type"] == "response.created" && id == "" {
			id = ev["response"].(map[string]any)["id"].(string)
			if err := p.Kill(); err != nil { // the writer takes a token every 20ms of a long input
				t.Errorf("kill: %v", err)
			}
		}
	})
	_ = bg.Wait() // the stream broke
	if id == "" || len(first.seqs) == 0 || first.types[len(first.types)-1] == "response.completed" {
		t.Fatalf("stream before the kill: %v; want it to break after response.created", first.types)
	}
	p = start("second")
	defer func() {
		if err := p.Terminate(30 * time.Second); err != nil {
			t.Error(err)
		}
	}()
	after := first.seqs[len(first.seqs)-1]
	rc := exec.CommandContext(t.Context(), "sh", "resume.sh", id, strconv.FormatInt(after, 10))
	rc.Env = append(os.Environ(), "BASE="+p.URL())
	rout, err := rc.Output()
	if err != nil {
		t.Fatalf("resume.sh: %v\n%s", err, rout)
	}
	rest := readSSE(t, bufio.NewScanner(strings.NewReader(string(rout))), nil)
	for i, seq := range rest.seqs {
		if seq != after+1+int64(i) {
			t.Fatalf("resumed sequence numbers %v after %d: a gap or a repeat", rest.seqs, after)
		}
	}
	if len(rest.types) == 0 || rest.types[len(rest.types)-1] != "response.completed" {
		t.Fatalf("resumed events %v: want them to end with response.completed", rest.types)
	}
	raw, _ := json.Marshal(rest.last["response"])
	resumed := decodeResponse(t, raw)
	polled := decodeResponse(t, script(t, p.URL(), "poll.sh", id))
	if polled.Status != "completed" || polled.ID != id {
		t.Fatalf("polled %+v", polled)
	}
	done = decodeResponse(t, script(t, p.URL(), "approve.sh", id, resumed.approvalCall(t)))
	if done.Status != "completed" || len(done.texts()) != 2 || !strings.HasPrefix(done.texts()[0], "blog: Echo: our durable workflow server, which keeps") {
		t.Fatalf("approved after the restart: %s %q", done.Status, done.texts())
	}
	log, _ := os.ReadFile(filepath.Join(dir, "second.log"))
	if !strings.Contains(string(log), "host: resuming run") || !strings.Contains(string(log), id) {
		t.Fatalf("the second server's log does not show %s resumed:\n%s", id, log)
	}
	t.Logf("resumed: %s", grepLine(string(log), "host: resuming run"))
}

// grepLine returns the first line of s that contains sub.
func grepLine(s, sub string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			return l
		}
	}
	return fmt.Sprintf("(no line with %q)", sub)
}
