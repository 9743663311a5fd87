package multihost

import (
	"flag"
	"testing"

	"github.com/superstep/superstep/internal/testkit/proctest"
)

var (
	flagKills  = flag.Int("kills", 20, "multihost: SIGKILLs in TestMultihost_Kills (CI runs the default)")
	flagSpread = flag.Int("spread", 1000, "multihost: background runs in TestMultihost_Spread")
	flagSeed   = flag.Uint64("seed", 0, "multihost: seed of the kill schedule and workloads (0: from the clock)")
	flagKeep   = flag.Bool("keep", false, "multihost: keep the journal and server logs of failed tests")
)

// binary is the path of the superstep binary TestMain builds (with -race
// when the tests have it, so the servers are checked for data races under
// multi-host load).
var binary string

func TestMain(m *testing.M) {
	proctest.MainWithBinary(m, "github.com/superstep/superstep/cmd/superstep", "superstep", &binary)
}
