package crash

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"
)

var (
	flagKills = flag.Int("kills", 50, "crash: SIGKILLs per test (CI runs the default; thousands locally)")
	flagSeed  = flag.Uint64("seed", 0, "crash: seed of the kill schedule and workloads (0: from the clock)")
	flagKeep  = flag.Bool("keep", false, "crash: keep the database, journal and server logs of failed tests")
)

// binary is the path of the superstep binary TestMain builds.
var binary string

func TestMain(m *testing.M) {
	flag.Parse()
	dir, err := os.MkdirTemp("", "superstep-crash-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "crash: temp dir:", err)
		os.Exit(2)
	}
	binary = filepath.Join(dir, "superstep")
	args := []string{"build", "-o", binary}
	if raceEnabled {
		args = append(args, "-race")
	}
	build := exec.Command("go", append(args, "../../cmd/superstep")...)
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "crash: go build ./cmd/superstep:", err)
		os.RemoveAll(dir)
		os.Exit(2)
	}
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		os.RemoveAll(dir)
		os.Exit(code)
	}))
}
