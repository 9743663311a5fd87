//go:build linux || darwin

package sqlite_test

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/superstep/superstep/store/sqlite"
	"github.com/superstep/superstep/store/storetest"
)

// lockChildEnv makes this test binary, re-executed, act as one of
// TestLockChild's roles instead of running the tests.
const lockChildEnv = "SUPERSTEP_SQLITE_LOCK_CHILD"

// TestOpen_FailedSecondOpenKeepsSQLiteLocks: a second Open of a database
// in the process that holds it fails, and that failure must leave SQLite's
// own POSIX locks in place. When it dropped them (by closing a descriptor
// of the database file), a reader in another process believed it was the
// last connection at close, checkpointed and deleted the WAL, and the
// holder's next acknowledged commits went to an unlinked WAL and were lost
// at the holder's SIGKILL.
//
// Not parallel: it forks processes, and a child holds a copy of every
// descriptor of the test process between its fork and its exec, the flock
// of another test's just-closed store included, so that test's next Open
// of the same file found it locked (TestOpenForgetsHosts failed so in CI).
func TestOpen_FailedSecondOpenKeepsSQLiteLocks(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	path := filepath.Join(t.TempDir(), "s.db")

	holder := exec.Command(os.Args[0], "-test.run=^TestLockChild$")
	holder.Env = append(os.Environ(), lockChildEnv+"=holder", "SUPERSTEP_SQLITE_LOCK_DB="+path)
	holder.Stderr = os.Stderr
	stdin, err := holder.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := holder.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	killed := false
	defer func() {
		if !killed {
			_ = holder.Process.Kill()
			_ = holder.Wait()
		}
	}()
	lines := bufio.NewScanner(stdout)
	// expect reads the holder's next protocol line, which must start with
	// prefix, and returns its fields after it.
	expect := func(prefix string) []string {
		t.Helper()
		for lines.Scan() {
			if f := strings.Fields(lines.Text()); len(f) > 0 && f[0] == prefix {
				return f[1:]
			} else if len(f) > 0 && f[0] == "error" {
				t.Fatalf("holder: %s", lines.Text())
			}
		}
		t.Fatalf("holder ended before %q: %v", prefix, lines.Err())
		return nil
	}
	ready := expect("ready") // created a response, then failed a second Open
	runID := ready[0]
	step, _ := strconv.ParseInt(ready[1], 10, 64)

	// Another process sees the holder's SHARED lock (which SQLite keeps
	// on the database file in WAL mode) and reads the file through the
	// driver; an operator's sqlite3 shell does the same when installed.
	reader := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestLockChild$")
	reader.Env = append(os.Environ(), lockChildEnv+"=reader", "SUPERSTEP_SQLITE_LOCK_DB="+path)
	out, err := reader.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "count 1") {
		t.Fatalf("reader: %v\n%s", err, out)
	}
	if want := fmt.Sprintf("shared lock held by %d", holder.Process.Pid); !strings.Contains(string(out), want) {
		t.Fatalf("reader: want %q (SQLite's lock of the holder kept after its failed second Open), got\n%s", want, out)
	}
	if cli, err := exec.LookPath("sqlite3"); err == nil {
		out, err := exec.CommandContext(ctx, cli, path, "select count(*) from responses").CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) != "1" {
			t.Fatalf("%s: %v\n%s", cli, err, out)
		}
	}

	if _, err := io.WriteString(stdin, "commit\n"); err != nil {
		t.Fatal(err)
	}
	expect("committed") // three acknowledged commits
	killed = true
	_ = holder.Process.Kill()
	_ = holder.Wait()

	s, err := sqlite.Open(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	run, err := s.RunGet(ctx, runID)
	if err != nil {
		t.Fatal(err)
	}
	if run.LastStep != step+3 {
		t.Fatalf("after SIGKILL the run is at step %d, want %d: acknowledged commits were lost", run.LastStep, step+3)
	}
	if _, err := os.Stat(sqlite.LockPath(path)); err != nil {
		t.Fatalf("lock file: %v", err)
	}
}

// TestLockChild is TestOpen_FailedSecondOpenKeepsSQLiteLocks's child
// process; run directly, it does nothing. As "holder" it opens the store,
// creates a response, fails a second Open, says "ready RUN STEP", then on
// "commit" commits three steps, says "committed" and waits to be killed.
// As "reader" it says which process holds a SHARED lock on the database
// file (asking with F_GETLK, which takes no lock), then opens the file
// through the driver alone, counts the responses, says "count N" and
// closes it.
func TestLockChild(t *testing.T) {
	path := os.Getenv("SUPERSTEP_SQLITE_LOCK_DB")
	switch os.Getenv(lockChildEnv) {
	case "holder":
		lockHolder(t, path)
	case "reader":
		fmt.Println(sharedLockHolder(t, path))
		db, err := sql.Open("sqlite3", path)
		if err != nil {
			t.Fatal(err)
		}
		var n int
		if err := db.QueryRow("select count(*) from responses").Scan(&n); err != nil {
			t.Fatal(err)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		fmt.Printf("count %d\n", n)
	}
}

func lockHolder(t *testing.T, path string) {
	ctx := context.Background()
	fail := func(format string, args ...any) {
		fmt.Printf("error "+format+"\n", args...)
		os.Exit(1)
	}
	s, err := sqlite.Open(ctx, path, nil)
	if err != nil {
		fail("open: %v", err)
	}
	c := storetest.CreateResponse(ctx, t, s, nil)
	if _, err := sqlite.Open(ctx, path, nil); !errors.Is(err, sqlite.ErrLocked) {
		fail("second open: %v, want ErrLocked", err)
	}
	fmt.Printf("ready %s %d\n", c.Run.ID, c.Run.LastStep)
	in := bufio.NewScanner(os.Stdin)
	if !in.Scan() || in.Text() != "commit" {
		fail("no commit command: %v", in.Err())
	}
	for range 3 {
		if _, err := s.Commit(ctx, storetest.NextCommit(ctx, t, s, c.Run.ID, nil)); err != nil {
			fail("commit: %v", err)
		}
	}
	fmt.Println("committed")
	for in.Scan() { // until killed
	}
	os.Exit(0)
}

// sharedLockHolder says which process holds a POSIX lock on the range of
// SQLite's SHARED locks (bytes 0x40000002 to 0x40000200 of the database
// file) that a write lock would conflict with. It opens and closes a
// descriptor of the file, which is harmless in a process that holds no
// lock on it.
func sharedLockHolder(t *testing.T, path string) string {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	lk := syscall.Flock_t{Type: syscall.F_WRLCK, Whence: io.SeekStart, Start: 0x40000002, Len: 510}
	if err := syscall.FcntlFlock(f.Fd(), syscall.F_GETLK, &lk); err != nil {
		t.Fatal(err)
	}
	if lk.Type == syscall.F_UNLCK {
		return "shared lock held by none"
	}
	return fmt.Sprintf("shared lock held by %d", lk.Pid)
}
