// Command bench measures superstep side by side with DBOS Transact Go and
// go-workflows on the same machine, with the same durability, and against
// the disk's limit (issue 8). It writes the section "## Side by side
// (bench/)" of docs/benchmarks.md and a plot in docs/img/.
//
//	cd bench && go run .          # the full measured run (several minutes)
//	cd bench && go run . -smoke   # every workload, tiny counts, no report
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"
	"time"
)

// config is the parsed command line.
type config struct {
	smoke       bool
	runs        int
	warm, dur   time.Duration
	only        string // comma-separated system keys; "" = all
	skipCrash   bool
	crashKills  int
	doc, img    string
	workDir     string
	childMode   string // internal: crash child
	childArgs   childArgs
	printOnly   bool
	render      bool
	workloads   string
	concs       string
	cpuProfile  string
	loadComment string
}

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func parseFlags(args []string, stderr io.Writer) (*config, error) {
	c := &config{}
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.BoolVar(&c.smoke, "smoke", false, "run every workload once with tiny counts; write no report")
	fs.IntVar(&c.runs, "runs", 5, "runs per cell (medians with min/max)")
	fs.DurationVar(&c.warm, "warm", 300*time.Millisecond, "warm-up per run")
	fs.DurationVar(&c.dur, "dur", 2*time.Second, "timed window per run")
	fs.StringVar(&c.only, "only", "", "comma-separated system keys to run (default all): "+allKeys())
	fs.BoolVar(&c.skipCrash, "skip-crash", false, "skip W4 (SIGKILL and restart)")
	fs.IntVar(&c.crashKills, "kills", 5, "W4: SIGKILLs per system")
	fs.StringVar(&c.doc, "doc", "../docs/benchmarks.md", "Markdown file whose bench section is (re)written")
	fs.StringVar(&c.img, "img", "../docs/img/bench-side-by-side.svg", "SVG plot written")
	fs.StringVar(&c.workDir, "dir", "", "directory for SQLite files (default: a fresh temp dir)")
	fs.BoolVar(&c.printOnly, "print", false, "print the report to stdout instead of writing files")
	fs.StringVar(&c.workloads, "workloads", "", "comma-separated workloads to measure (W1,W2,W3,limit); default all")
	fs.StringVar(&c.concs, "conc", "", "comma-separated concurrencies to measure (1,8,64); default all")
	fs.StringVar(&c.cpuProfile, "cpuprofile", "", "write a CPU profile of the measuring process to this file")
	fs.DurationVar(&gowPollInterval, "gow-poll", gowPollInterval, "go-workflows polling interval (workflow and activity workers)")
	fs.BoolVar(&pgGroupCommit, "pg-group-commit", pgGroupCommit, "superstep on PostgreSQL: group commit (the store's default); false writes each commit alone")
	fs.StringVar(&pgSuffix, "pg-suffix", "", "appended to the name of every PostgreSQL database the bench creates and drops (benches sharing a server)")
	fs.IntVar(&pgCommitInFlight, "pg-commit-inflight", 0, "superstep on PostgreSQL: group-commit batches in flight at once (0: the store's default)")
	fs.BoolVar(&pgCommitStats, "pg-commit-stats", pgCommitStats, "superstep on PostgreSQL: print the group-commit batch sizes of each run to stderr")
	fs.IntVar(&sqlitePageSize, "sqlite-page-size", 0, "superstep on SQLite: page size of the new database file (0: the store's default)")
	fs.BoolVar(&storeStats, "store-stats", storeStats, "superstep: print each cell's store time per workflow (Commit, ResponseCreate) and the group-commit batch sizes to stderr")
	fs.BoolVar(&c.render, "render", false, "re-render the section and plot from results.json and "+analysisFile+" without measuring")
	fs.StringVar(&c.loadComment, "note", "", "extra note for the report (e.g. load conditions)")
	c.childArgs.register(fs)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if c.smoke {
		c.runs, c.warm, c.dur, c.crashKills = 1, 0, 50*time.Millisecond, 1
	}
	if c.runs < 1 || c.dur <= 0 || c.crashKills < 1 {
		return nil, errors.New("bench: -runs and -kills must be >= 1 and -dur positive")
	}
	return c, nil
}

func run(args []string, stdout, stderr io.Writer) error {
	c, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if c.childArgs.mode != "" {
		return runChild(ctx, &c.childArgs)
	}
	if c.render {
		s, err := loadSummary("results.json")
		if err != nil {
			return err
		}
		return render(s, c, stdout)
	}
	dir := c.workDir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "superstep-bench-"); err != nil {
			return fmt.Errorf("bench: temp dir: %w", err)
		}
		defer os.RemoveAll(dir)
	}
	if c.cpuProfile != "" {
		f, err := os.Create(c.cpuProfile)
		if err != nil {
			return fmt.Errorf("bench: cpuprofile: %w", err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return fmt.Errorf("bench: cpuprofile: %w", err)
		}
		defer pprof.StopCPUProfile()
	}
	rep, err := runAll(ctx, c, dir, stdout)
	if err != nil {
		return err
	}
	if c.smoke {
		fmt.Fprintln(stdout, "bench: smoke run passed (every workload ran; no speed assertions)")
		return nil
	}
	return rep.write(c, stdout)
}
