package e2e

import (
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden SSE transcripts in testdata/")

var (
	hexID     = regexp.MustCompile(`[0-9a-f]{16,}`)
	timestamp = regexp.MustCompile(`"(created_at|completed_at)":[0-9]+`)
)

// normalize replaces what differs between runs (ids, timestamps).
func normalize(b []byte) []byte {
	b = hexID.ReplaceAll(b, []byte("X"))
	return timestamp.ReplaceAll(b, []byte(`"$1":0`))
}

// TestGolden_SSE compares whole SSE transcripts, byte for byte after
// normalising ids and timestamps, with testdata/*.sse (go test -run
// TestGolden ./e2e -update rewrites them). It pins the wire format real
// clients parse: frame layout, event order, field names and nulls.
func TestGolden_SSE(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	cases := map[string]string{
		"echo.sse":     `{"model":"demo.echo","input":"hello","stream":true}`,
		"approval.sse": `{"model":"demo.approval","input":"ship it?","stream":true,"metadata":{"team":"a"}}`,
	}
	for name, body := range cases {
		got := normalize(readAll(t, e.rawDo(t, "POST", "/v1/responses", body, nil)))
		path := filepath.Join("testdata", name)
		if *update {
			if err := os.MkdirAll("testdata", 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, got, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run with -update to create it)", err)
		}
		if string(got) != string(want) {
			t.Errorf("%s differs from the golden transcript (rerun with -update if the change is intended):\n%s", name, got)
		}
	}
}
