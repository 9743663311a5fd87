package proctest

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// BuildTimeout bounds MainWithBinary's build: a cold race-enabled build of
// a server takes minutes on a loaded machine.
const BuildTimeout = 10 * time.Minute

// BuildTemp builds the main package pkg into a fresh temporary directory,
// as name and with -race when this binary has it (RaceEnabled), and
// returns the binary's path and a function that removes the directory. A
// TestMain calls it once for all of its package's tests.
func BuildTemp(ctx context.Context, pkg, name string) (bin string, remove func(), err error) {
	dir, err := os.MkdirTemp("", "superstep-"+name+"-bin-")
	if err != nil {
		return "", nil, fmt.Errorf("proctest: temp dir: %w", err)
	}
	remove = func() { _ = os.RemoveAll(dir) }
	bin = filepath.Join(dir, name)
	if err := Build(ctx, pkg, bin, RaceEnabled); err != nil {
		remove()
		return "", nil, err
	}
	return bin, remove, nil
}

// MainWithBinary is the TestMain of a package that runs a server binary:
// it parses the flags, builds pkg with BuildTemp (name is the binary's
// name, also prefixing failure messages), sets *bin to its path, runs the
// tests checking for leaked goroutines (goleak), removes the binary and
// exits with the tests' code; a failed build exits 2.
func MainWithBinary(m *testing.M, pkg, name string, bin *string) {
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), BuildTimeout)
	path, remove, err := BuildTemp(ctx, pkg, name)
	cancel()
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		os.Exit(2)
	}
	*bin = path
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		remove()
		os.Exit(code)
	}))
}

// WorkDir returns a directory for a test's server logs and files: a
// temporary one removed with the test, or, with keep (a -keep flag), one
// that outlives a failed test and is named in its log so it can be read.
func WorkDir(tb testing.TB, keep bool, prefix string) string {
	tb.Helper()
	if !keep {
		return tb.TempDir()
	}
	dir, err := os.MkdirTemp("", prefix+"-")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if tb.Failed() {
			tb.Logf("kept the journal and server logs in %s", dir)
			return
		}
		os.RemoveAll(dir)
	})
	return dir
}
