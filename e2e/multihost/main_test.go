package multihost

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/superstep/superstep/internal/proctest"
)

var (
	flagKills  = flag.Int("kills", 20, "multihost: SIGKILLs in TestMultihost_Kills (CI runs the default)")
	flagSpread = flag.Int("spread", 1000, "multihost: background runs in TestMultihost_Spread")
	flagSeed   = flag.Uint64("seed", 0, "multihost: seed of the kill schedule and workloads (0: from the clock)")
	flagKeep   = flag.Bool("keep", false, "multihost: keep the journal and server logs of failed tests")
)

// binary is the path of the superstep binary TestMain builds.
var binary string

func TestMain(m *testing.M) {
	flag.Parse()
	dir, err := os.MkdirTemp("", "superstep-multihost-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "multihost: temp dir:", err)
		os.Exit(2)
	}
	binary = filepath.Join(dir, "superstep")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	err = proctest.Build(ctx, "github.com/superstep/superstep/cmd/superstep", binary, raceEnabled)
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "multihost:", err)
		os.RemoveAll(dir)
		os.Exit(2)
	}
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		os.RemoveAll(dir)
		os.Exit(code)
	}))
}
