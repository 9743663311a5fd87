package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/superstep/superstep/store/sqlite"
)

// cell is one (workload, concurrency) pair measured on a system.
type cell struct {
	w    workload
	conc int
}

// workflowCells are measured on every workflow system: W1 at the W5
// concurrencies, W2 and W3 at 8.
var workflowCells = []cell{{w1Chain, 1}, {w1Chain, 8}, {w1Chain, 64}, {w2FanOut, 8}, {w3Events, 8}}

// limitCells are measured on the limit rows.
var limitCells = []cell{{wLimit, 1}, {wLimit, 8}}

// entry is a system of the run: how to make it on a fresh database.
type entry struct {
	key   string
	pgDB  string // database to create and drop; "" for none
	make  func(dir, pgURL string) system
	cells []cell
}

// wants reports whether cl passes the -workloads and -conc filters.
func (c *config) wants(cl cell) bool {
	if c.workloads != "" && !slices.Contains(strings.Split(c.workloads, ","), string(cl.w)) {
		return false
	}
	return c.concs == "" || slices.Contains(strings.Split(c.concs, ","), strconv.Itoa(cl.conc))
}

func entries() []entry {
	return []entry{
		{key: "limit-fsync", cells: limitCells[:1], make: func(dir, _ string) system {
			return &fsyncLimit{path: filepath.Join(dir, "fsync.dat")}
		}},
		{key: "limit-sqlite", cells: limitCells, make: func(dir, _ string) system {
			return &sqliteLimit{driver: "sqlite3", path: filepath.Join(dir, "limit-mattn.db"), sync: "FULL"}
		}},
		{key: "limit-sqlite-modernc", cells: limitCells, make: func(dir, _ string) system {
			return &sqliteLimit{driver: "sqlite", path: filepath.Join(dir, "limit-modernc.db"), sync: "FULL"}
		}},
		{key: "limit-pg", pgDB: pgName("bench_limit"), cells: limitCells, make: func(_, url string) system {
			return &pgLimit{url: url, db: pgName("bench_limit")}
		}},
		{key: "superstep-sqlite", cells: workflowCells, make: func(dir, _ string) system {
			return newSuperstepSQLite(filepath.Join(dir, "superstep-full.db"), sqlite.SynchronousFull)
		}},
		{key: "superstep-sqlite-normal", cells: workflowCells[1:2], make: func(dir, _ string) system {
			return newSuperstepSQLite(filepath.Join(dir, "superstep-normal.db"), sqlite.SynchronousNormal)
		}},
		{key: "superstep-pg", pgDB: pgName("bench_superstep"), cells: workflowCells, make: func(_, url string) system {
			return newSuperstepPostgres(url, pgName("bench_superstep"), 0)
		}},
		{key: "superstep-pg-pool20", pgDB: pgName("bench_superstep20"), cells: workflowCells[1:3], make: func(_, url string) system {
			return newSuperstepPostgres(url, pgName("bench_superstep20"), 20) // DBOS's pool size
		}},
		{key: "superstep-http", cells: []cell{{w1Chain, 1}, {w1Chain, 8}, {w3Events, 8}}, make: func(dir, _ string) system {
			return newSuperstepHTTP(filepath.Join(dir, "superstep-http.db"))
		}},
		{key: "superstep-http-pg", pgDB: pgName("bench_superstep_http"), cells: []cell{{w1Chain, 1}, {w1Chain, 8}}, make: func(_, url string) system {
			return newSuperstepHTTPPostgres(url, pgName("bench_superstep_http"))
		}},
		{key: "dbos-pg", pgDB: pgName("bench_dbos"), cells: workflowCells, make: func(_, url string) system {
			return newDBOSPostgres(url, pgName("bench_dbos"))
		}},
		{key: "dbos-sqlite", cells: workflowCells, make: func(dir, _ string) system {
			return newDBOSSQLite(filepath.Join(dir, "dbos-full.db"), "FULL")
		}},
		{key: "dbos-sqlite-normal", cells: workflowCells[1:2], make: func(dir, _ string) system {
			return newDBOSSQLite(filepath.Join(dir, "dbos-normal.db"), "NORMAL")
		}},
		{key: "gow-sqlite", cells: workflowCells[:4], make: func(dir, _ string) system {
			return newGoWorkflows(filepath.Join(dir, "gow.db"), gowPollInterval)
		}},
		{key: "gow-sqlite-10ms", cells: workflowCells[:2], make: func(dir, _ string) system {
			return newGoWorkflows(filepath.Join(dir, "gow-10ms.db"), 10*time.Millisecond)
		}},
	}
}

// pgSuffix is appended to the name of every PostgreSQL database the bench
// creates and drops (-pg-suffix), so that two benches can share a server.
var pgSuffix string

func pgName(db string) string { return db + pgSuffix }

func allKeys() string {
	var ks []string
	for _, e := range entries() {
		ks = append(ks, e.key)
	}
	return strings.Join(ks, ",")
}

// result is every run of one cell of one system.
type result struct {
	key, system, storage string
	cell                 cell
	runs                 []runStat
	err                  error
}

// report is what a whole run produced.
type report struct {
	results  []*result
	crash    []crashResult
	pgInfo   string
	started  time.Time
	finished time.Time
	loadPre  string
	loadPost string
}

// runAll measures every selected system, interleaving the runs (run 1 of
// every cell, then run 2, ...) so that drift in machine load spreads over
// all systems alike.
func runAll(ctx context.Context, c *config, dir string, out io.Writer) (*report, error) {
	pg, err := newPGAdmin(ctx)
	if err != nil {
		return nil, err
	}
	defer pg.close(context.WithoutCancel(ctx))
	rep := &report{started: time.Now(), loadPre: loadAvg()}
	if rep.pgInfo, err = pg.settings(ctx); err != nil {
		return nil, err
	}
	sel := selected(c.only)
	if c.smoke && c.only == "" {
		// Variants (other settings of a system already in the run) add
		// nothing to a smoke run but time.
		sel = slices.DeleteFunc(sel, func(e entry) bool {
			return strings.HasSuffix(e.key, "-normal") || strings.HasSuffix(e.key, "-pool20") ||
				strings.HasSuffix(e.key, "-10ms") || e.key == "limit-sqlite-modernc"
		})
	}
	systems := map[string]system{}
	for _, e := range sel {
		url := ""
		if e.pgDB != "" {
			if err := pg.createDB(ctx, e.pgDB); err != nil {
				return nil, err
			}
			defer pg.dropDB(context.WithoutCancel(ctx), e.pgDB)
			if url, err = pgURLFor(e.pgDB); err != nil {
				return nil, err
			}
		}
		systems[e.key] = e.make(dir, url)
		seen := map[workload]bool{}
		for _, cl := range e.cells {
			if (c.smoke && seen[cl.w]) || !c.wants(cl) {
				continue // smoke: each workload once per system
			}
			seen[cl.w] = true
			rep.results = append(rep.results, &result{key: e.key, system: systems[e.key].name(),
				storage: systems[e.key].storage(), cell: smokeCell(c, cl)})
		}
	}
	for i := range c.runs {
		for _, r := range rep.results {
			if r.err != nil || ctx.Err() != nil {
				continue
			}
			minWarm := r.cell.conc
			if c.smoke {
				minWarm = 0
			}
			st, err := measure(ctx, pg, systems[r.key], r.cell.w, cellSpec{conc: r.cell.conc, warm: c.warm, dur: c.dur, minWarmWFs: minWarm})
			if err != nil {
				r.err = err
				fmt.Fprintf(out, "run %d %-24s %-6s c=%-3d ERROR %v\n", i+1, r.key, r.cell.w, r.cell.conc, err)
				continue
			}
			r.runs = append(r.runs, st)
			fmt.Fprintf(out, "run %d %-24s %-6s c=%-3d %8.1f wf/s p50 %-10v p99 %-10v xact/wf %5.2f writes/wf %5.2f bytes/step %8.0f allocs/step %7.0f\n",
				i+1, r.key, r.cell.w, r.cell.conc, st.wfps, st.p50.Round(time.Microsecond), st.p99.Round(time.Microsecond),
				st.commitsWF, st.writesWF, st.bytesStep, st.allocsStep)
		}
	}
	if !c.skipCrash {
		rep.crash = runCrashes(ctx, c, dir, pg, sel, out)
	}
	rep.finished, rep.loadPost = time.Now(), loadAvg()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return rep, smokeErrors(c, rep)
}

// smokeCell shrinks the concurrency of a smoke run so that it takes seconds.
func smokeCell(c *config, cl cell) cell {
	if c.smoke && cl.conc > 2 {
		cl.conc = 2
	}
	return cl
}

// smokeErrors fails a smoke run on any error; a full run reports errors
// in the table instead.
func smokeErrors(c *config, rep *report) error {
	if !c.smoke {
		return nil
	}
	for _, r := range rep.results {
		if r.err != nil {
			return fmt.Errorf("bench: smoke: %s %s c=%d: %w", r.key, r.cell.w, r.cell.conc, r.err)
		}
	}
	for _, cr := range rep.crash {
		if cr.err != nil {
			return fmt.Errorf("bench: smoke: W4 %s: %w", cr.key, cr.err)
		}
	}
	return nil
}

func selected(only string) []entry {
	all := entries()
	if only == "" {
		return all
	}
	keys := strings.Split(only, ",")
	return slices.DeleteFunc(all, func(e entry) bool { return !slices.Contains(keys, e.key) })
}
