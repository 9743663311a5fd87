package testkit_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestNotLinked checks that the superstep command, in a normal build and
// with -tags faults, links neither a harness of internal/testkit nor
// package testing.
func TestNotLinked(t *testing.T) {
	t.Parallel()
	for _, tags := range []string{"", "faults"} {
		out, err := exec.Command("go", "list", "-tags", tags, "-deps",
			"github.com/superstep/superstep/cmd/superstep").CombinedOutput()
		if err != nil {
			t.Fatalf("go list -tags %q: %v\n%s", tags, err, out)
		}
		for _, pkg := range strings.Fields(string(out)) {
			if pkg == "testing" || strings.HasPrefix(pkg, "github.com/superstep/superstep/internal/testkit") {
				t.Errorf("cmd/superstep (tags %q) links %s", tags, pkg)
			}
		}
	}
}
