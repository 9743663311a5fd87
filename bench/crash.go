package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// killAtStep is the step during which W4 kills the child (of chainSteps).
const killAtStep = 5

// crashKill is the outcome of one SIGKILL and restart.
type crashKill struct {
	resume     time.Duration // restart (exec) to the first step executed again
	fromMain   time.Duration // the new process's main() to the first step executed again
	open       time.Duration // restart (exec) to the store/system opened
	finish     time.Duration // restart (exec) to the workflow done
	reExecuted int           // step executions beyond one per step
	lost, dup  int           // events missing from / repeated in the final log
	events     bool          // whether the system has an event log to check
}

// crashResult is W4 for one system.
type crashResult struct {
	key, system, storage string
	kills                []crashKill
	err                  error
}

// crashKeys are the systems W4 kills.
var crashKeys = []string{"superstep-sqlite", "superstep-pg", "dbos-pg", "dbos-sqlite", "gow-sqlite"}

func runCrashes(ctx context.Context, c *config, dir string, pg *pgAdmin, sel []entry, out io.Writer) []crashResult {
	var res []crashResult
	for _, e := range sel {
		if !contains(crashKeys, e.key) || ctx.Err() != nil {
			continue
		}
		sys := e.make(dir, "")
		cr := crashResult{key: e.key, system: sys.name(), storage: sys.storage()}
		for k := range c.crashKills {
			kill, err := crashOnce(ctx, e, dir, pg, k)
			if err != nil {
				cr.err = err
				fmt.Fprintf(out, "W4 %-18s kill %d ERROR %v\n", e.key, k+1, err)
				break
			}
			cr.kills = append(cr.kills, kill)
			fmt.Fprintf(out, "W4 %-18s kill %d resume %v (from main %v, open %v, finish %v) re-executed %d lost %d dup %d\n", e.key, k+1,
				kill.resume.Round(time.Microsecond), kill.fromMain.Round(time.Microsecond), kill.open.Round(time.Microsecond),
				kill.finish.Round(time.Microsecond), kill.reExecuted, kill.lost, kill.dup)
		}
		res = append(res, cr)
	}
	return res
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if x == y {
			return true
		}
	}
	return false
}

// crashOnce starts a child on a fresh database, SIGKILLs it during step
// killAtStep, restarts it and reads what happened from the journal.
func crashOnce(ctx context.Context, e entry, dir string, pg *pgAdmin, k int) (crashKill, error) {
	var ck crashKill
	a := childArgs{sys: e.key, id: fmt.Sprintf("w4-%s-%d-%d", e.key, k, time.Now().UnixNano()), delay: 30 * time.Millisecond,
		journal: filepath.Join(dir, fmt.Sprintf("w4-%s-%d.journal", e.key, k))}
	if e.pgDB != "" {
		db := "bench_w4_" + strings.ReplaceAll(e.key, "-", "_")
		if err := pg.createDB(ctx, db); err != nil {
			return ck, err
		}
		defer pg.dropDB(context.WithoutCancel(ctx), db)
		url, err := pgURLFor(db)
		if err != nil {
			return ck, err
		}
		a.db = url
	} else {
		a.db = filepath.Join(dir, fmt.Sprintf("w4-%s-%d.db", e.key, k))
	}
	a.mode = "start"
	first, err := startChild(ctx, &a)
	if err != nil {
		return ck, err
	}
	created, err := waitForStep(ctx, a.journal, killAtStep, first)
	if err == nil {
		time.Sleep(a.delay / 2) // inside step killAtStep
	}
	_ = first.Process.Signal(syscall.SIGKILL)
	_ = first.Wait()
	if err != nil {
		return ck, err
	}
	if created != "" {
		a.id = created
	}
	a.mode = "resume"
	restart := time.Now()
	second, err := startChild(ctx, &a)
	if err != nil {
		return ck, err
	}
	outBuf := second.Stdout.(*bytes.Buffer)
	if err := waitChild(second, 3*time.Minute); err != nil {
		return ck, fmt.Errorf("bench: W4 %s resume child: %w: %s", e.key, err, second.Stderr.(*bytes.Buffer).String())
	}
	return analyse(a.journal, restart, outBuf.Bytes())
}

func startChild(ctx context.Context, a *childArgs) (*exec.Cmd, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("bench: executable: %w", err)
	}
	cmd := exec.CommandContext(ctx, self, "-child", a.mode, "-child-sys", a.sys, "-child-db", a.db,
		"-child-journal", a.journal, "-child-id", a.id, "-child-delay", a.delay.String())
	cmd.Stdout, cmd.Stderr = &bytes.Buffer{}, &bytes.Buffer{}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("bench: start child: %w", err)
	}
	return cmd, nil
}

func waitChild(cmd *exec.Cmd, limit time.Duration) error {
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(limit):
		_ = cmd.Process.Signal(syscall.SIGKILL)
		<-done
		return fmt.Errorf("did not finish within %v", limit)
	}
}

// waitForStep polls the journal until step n started; it returns the id
// of a "created" line, if any.
func waitForStep(ctx context.Context, path string, n int64, child *exec.Cmd) (string, error) {
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		lines, _ := readJournal(path)
		created := ""
		for _, l := range lines {
			if l.kind == "created" {
				created = l.id
			}
			if l.kind == "step" && l.step == n {
				return created, nil
			}
		}
		if child.ProcessState != nil {
			break
		}
		time.Sleep(2 * time.Millisecond)
	}
	return "", fmt.Errorf("bench: W4: step %d never started: %s", n, child.Stderr.(*bytes.Buffer).String())
}

type journalLine struct {
	kind, id string
	step     int64
	at       time.Time
}

func readJournal(path string) ([]journalLine, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []journalLine
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) != 4 {
			continue
		}
		step, err1 := strconv.ParseInt(fs[2], 10, 64)
		ns, err2 := strconv.ParseInt(fs[3], 10, 64)
		if err1 != nil || err2 != nil {
			continue
		}
		out = append(out, journalLine{kind: fs[0], id: fs[1], step: step, at: time.Unix(0, ns)})
	}
	return out, sc.Err()
}

// analyse reads the journal and the resume child's output.
func analyse(path string, restart time.Time, childOut []byte) (crashKill, error) {
	var ck crashKill
	lines, err := readJournal(path)
	if err != nil {
		return ck, fmt.Errorf("bench: W4 journal: %w", err)
	}
	seen := map[int64]int{}
	var mainAt time.Time
	for _, l := range lines {
		switch {
		case l.kind == "step":
			seen[l.step]++
			if l.at.After(restart) && ck.resume == 0 {
				ck.resume = l.at.Sub(restart)
			}
		case l.kind == "opened" && l.at.After(restart) && ck.open == 0:
			ck.open = l.at.Sub(restart)
		case l.kind == "main" && l.at.After(restart):
			mainAt = l.at
		case l.kind == "done" && l.at.After(restart):
			ck.finish = l.at.Sub(restart)
		}
	}
	if !mainAt.IsZero() {
		ck.fromMain = restart.Add(ck.resume).Sub(mainAt)
	}
	for s := int64(1); s <= chainSteps; s++ {
		if seen[s] == 0 {
			return ck, fmt.Errorf("bench: W4: step %d never ran", s)
		}
		ck.reExecuted += seen[s] - 1
	}
	if ck.resume == 0 {
		return ck, errors.New("bench: W4: no step ran after the restart")
	}
	var res childResult
	if err := json.Unmarshal(bytes.TrimSpace(childOut), &res); err != nil {
		return ck, fmt.Errorf("bench: W4: child output %q: %w", childOut, err)
	}
	ck.events = res.Events != nil
	count := map[string]int{}
	for _, ev := range res.Events {
		count[ev]++
	}
	for s := 1; s <= chainSteps && ck.events; s++ {
		switch n := count[crashEvent(s)]; {
		case n == 0:
			ck.lost++
		case n > 1:
			ck.dup += n - 1
		}
	}
	return ck, nil
}
