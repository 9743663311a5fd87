package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"
)

// stat is the median, min and max over a cell's runs.
type stat struct{ Med, Min, Max float64 }

func statOf(xs []float64) stat {
	xs = slices.DeleteFunc(slices.Clone(xs), func(x float64) bool { return math.IsNaN(x) })
	if len(xs) == 0 {
		return stat{math.NaN(), math.NaN(), math.NaN()}
	}
	slices.Sort(xs)
	n := len(xs)
	med := xs[n/2]
	if n%2 == 0 {
		med = (xs[n/2-1] + xs[n/2]) / 2
	}
	return stat{med, xs[0], xs[n-1]}
}

// row is one measured cell, summarised; it is what results.json keeps.
type row struct {
	Key, System, Storage string
	Workload             string
	Conc, Runs, Steps    int
	WFps                 stat
	P50ms, P99ms         float64 // medians over runs
	XactWF, WritesWF     float64 // NaN (null in JSON) for SQLite
	BytesStep            float64
	AllocsStep           float64
	// superstep only (-1 otherwise): store calls per workflow and
	// Commit calls per superstep, counted in process.
	CommitsPerSS, CreatesWF, OtherWritesWF, ReadsWF float64
	Err                                             string
}

// crashRow is W4 of one system, summarised.
type crashRow struct {
	Key, System, Storage string
	Kills                int
	ResumeMs, OpenMs     stat
	MainMs, FinishMs     stat
	ReExecMax, ReExecSum int
	Lost, Dup            int
	Events               bool
	Err                  string
}

// summary is the whole run, as written to results.json and rendered.
type summary struct {
	Rows                []row
	Crash               []crashRow
	PGInfo, Machine, Go string
	Started, Finished   time.Time
	LoadPre, LoadPost   string
	Command, Note       string
	Runs                int
	Dur                 time.Duration
}

func summarise(r *report, c *config) *summary {
	s := &summary{PGInfo: r.pgInfo, Machine: machine(), Go: runtime.Version(), Started: r.started,
		Finished: r.finished, LoadPre: r.loadPre, LoadPost: r.loadPost, Runs: c.runs, Dur: c.dur,
		Command: "cd bench && go run . " + strings.Join(os.Args[1:], " "), Note: c.loadComment}
	for _, res := range r.results {
		rw := row{Key: res.key, System: res.system, Storage: res.storage, Workload: string(res.cell.w),
			Conc: res.cell.conc, Runs: len(res.runs), Steps: res.cell.w.steps()}
		if res.err != nil {
			rw.Err = res.err.Error()
		}
		var wf, p50, p99, xact, wr, by, al, css, cr, ow, rd []float64
		for _, st := range res.runs {
			if sc := st.store; sc != nil {
				n := float64(st.totalWFs)
				css = append(css, float64(sc.commits)/(n*float64(res.cell.w.supersteps())))
				cr, ow, rd = append(cr, float64(sc.creates)/n), append(ow, float64(sc.otherWrites)/n), append(rd, float64(sc.reads)/n)
			}
			wf = append(wf, st.wfps)
			p50 = append(p50, float64(st.p50)/1e6)
			p99 = append(p99, float64(st.p99)/1e6)
			xact, wr = append(xact, st.commitsWF), append(wr, st.writesWF)
			by, al = append(by, st.bytesStep), append(al, st.allocsStep)
		}
		rw.WFps = statOf(wf)
		rw.P50ms, rw.P99ms = statOf(p50).Med, statOf(p99).Med
		rw.XactWF, rw.WritesWF = statOf(xact).Med, statOf(wr).Med
		rw.BytesStep, rw.AllocsStep = statOf(by).Med, statOf(al).Med
		rw.CommitsPerSS, rw.CreatesWF, rw.OtherWritesWF, rw.ReadsWF = statOf(css).Med, statOf(cr).Med, statOf(ow).Med, statOf(rd).Med
		s.Rows = append(s.Rows, rw)
	}
	for _, cr := range r.crash {
		s.Crash = append(s.Crash, summariseCrash(cr))
	}
	return s
}

func summariseCrash(cr crashResult) crashRow {
	out := crashRow{Key: cr.key, System: cr.system, Storage: cr.storage, Kills: len(cr.kills)}
	if cr.err != nil {
		out.Err = cr.err.Error()
	}
	var res, op, mn, fin []float64
	for _, k := range cr.kills {
		res, op = append(res, float64(k.resume)/1e6), append(op, float64(k.open)/1e6)
		mn, fin = append(mn, float64(k.fromMain)/1e6), append(fin, float64(k.finish)/1e6)
		out.ReExecMax = max(out.ReExecMax, k.reExecuted)
		out.ReExecSum += k.reExecuted
		out.Lost, out.Dup, out.Events = out.Lost+k.lost, out.Dup+k.dup, k.events
	}
	out.ResumeMs, out.OpenMs, out.MainMs, out.FinishMs = statOf(res), statOf(op), statOf(mn), statOf(fin)
	return out
}

// write renders the section and the plot, and keeps the raw summary (not
// with -print: a partial run printed must not replace the summary the
// committed docs render from).
func (r *report) write(c *config, out io.Writer) error {
	s := summarise(r, c)
	if c.printOnly {
		return render(s, c, out)
	}
	raw, err := json.MarshalIndent(jsonSafe(s), "", "  ")
	if err != nil {
		return fmt.Errorf("bench: encode results: %w", err)
	}
	if err := os.WriteFile("results.json", raw, 0o644); err != nil {
		return fmt.Errorf("bench: write results.json: %w", err)
	}
	return render(s, c, out)
}

// render writes docs/benchmarks.md's section and the SVG from s.
func render(s *summary, c *config, out io.Writer) error {
	md := renderMarkdown(s, c)
	svg := renderSVG(s)
	if c.printOnly {
		_, err := io.WriteString(out, md)
		return err
	}
	if err := os.WriteFile(c.img, []byte(svg), 0o644); err != nil {
		return fmt.Errorf("bench: write %s: %w", c.img, err)
	}
	if err := replaceSection(c.doc, sectionHeading, md); err != nil {
		return err
	}
	fmt.Fprintf(out, "bench: wrote %s (section %q) and %s\n", c.doc, sectionHeading, c.img)
	return nil
}

// jsonSafe replaces NaN (which JSON cannot hold) by -1.
func jsonSafe(s *summary) *summary {
	c := *s
	c.Rows = slices.Clone(s.Rows)
	for i := range c.Rows {
		r := &c.Rows[i]
		for _, f := range []*float64{&r.XactWF, &r.WritesWF, &r.WFps.Med, &r.WFps.Min, &r.WFps.Max, &r.P50ms, &r.P99ms, &r.BytesStep,
			&r.AllocsStep, &r.CommitsPerSS, &r.CreatesWF, &r.OtherWritesWF, &r.ReadsWF} {
			if math.IsNaN(*f) {
				*f = -1
			}
		}
	}
	c.Crash = slices.Clone(s.Crash)
	for i := range c.Crash {
		cr := &c.Crash[i]
		for _, f := range []*float64{&cr.ResumeMs.Med, &cr.ResumeMs.Min, &cr.ResumeMs.Max, &cr.OpenMs.Med, &cr.OpenMs.Min,
			&cr.OpenMs.Max, &cr.MainMs.Med, &cr.MainMs.Min, &cr.MainMs.Max, &cr.FinishMs.Med, &cr.FinishMs.Min, &cr.FinishMs.Max} {
			if math.IsNaN(*f) {
				*f = -1
			}
		}
	}
	return &c
}

// loadSummary reads results.json back (for -render).
func loadSummary(path string) (*summary, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("bench: read %s: %w", path, err)
	}
	var s summary
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("bench: decode %s: %w", path, err)
	}
	for i := range s.Rows {
		r := &s.Rows[i]
		for _, f := range []*float64{&r.XactWF, &r.WritesWF, &r.CommitsPerSS, &r.CreatesWF, &r.OtherWritesWF, &r.ReadsWF} {
			if *f < 0 {
				*f = math.NaN()
			}
		}
	}
	return &s, nil
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

func machine() string {
	model := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "model name"); ok {
				model = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
		}
	}
	kernel := ""
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		kernel = ", Linux " + strings.TrimSpace(string(b))
	}
	return fmt.Sprintf("%d cores (%s)%s, ext4 on a virtual disk", runtime.NumCPU(), model, kernel)
}
