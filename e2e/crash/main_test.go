package crash

import (
	"flag"
	"testing"

	"github.com/superstep/superstep/internal/testkit/proctest"
)

var (
	flagKills = flag.Int("kills", 50, "crash: SIGKILLs per test (CI runs the default; thousands locally)")
	flagSeed  = flag.Uint64("seed", 0, "crash: seed of the kill schedule and workloads (0: from the clock)")
	flagKeep  = flag.Bool("keep", false, "crash: keep the database, journal and server logs of failed tests")
)

// binary is the path of the superstep binary TestMain builds (with -race
// when the tests have it, so the server is checked for data races under
// crash load).
var binary string

func TestMain(m *testing.M) {
	proctest.MainWithBinary(m, "github.com/superstep/superstep/cmd/superstep", "superstep", &binary)
}
