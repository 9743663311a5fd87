package crash

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// addrPattern finds the listening address in the server's output: the
// line serve prints on stdout whatever the log format (the logs may name
// other addresses first, such as the local model server's).
var addrPattern = regexp.MustCompile(`listening on http://(127\.0\.0\.1:[1-9][0-9]*)`)

// proc is one server process.
type proc struct {
	cmd    *exec.Cmd
	url    string // http://127.0.0.1:port
	out    *outWriter
	exited chan struct{} // closed once Wait returned
	err    error         // Wait's error, readable after exited
}

// cluster runs the server binary on one database, one process at a time,
// and lets clients wait for the current one to be up.
type cluster struct {
	bin, db, journal, dir string
	extraArgs             []string
	mu                    struct {
		sync.Mutex
		proc     *proc
		up       chan struct{} // closed when proc is up
		starts   int
		starting time.Duration // total time from exec to /healthz 200
	}
	// deltas counts the text deltas clients received (kills in live mode
	// wait for tokens to be streaming).
	deltas atomic.Int64
}

// newCluster returns a cluster for db writing its journal and logs in dir.
func newCluster(bin, db, dir string, extraArgs ...string) *cluster {
	c := &cluster{bin: bin, db: db, journal: filepath.Join(dir, "journal"), dir: dir, extraArgs: extraArgs}
	c.mu.up = make(chan struct{})
	return c
}

// start runs a fresh server process on the database and returns once it
// serves /healthz.
func (c *cluster) start(ctx context.Context) error {
	began := time.Now()
	c.mu.Lock()
	c.mu.starts++
	n := c.mu.starts
	c.mu.Unlock()
	logf, err := os.Create(filepath.Join(c.dir, fmt.Sprintf("server-%03d.log", n)))
	if err != nil {
		return fmt.Errorf("crash: server log: %w", err)
	}
	args := append([]string{"serve", "--db", c.db, "--addr", "127.0.0.1:0"}, c.extraArgs...)
	p := &proc{cmd: exec.Command(c.bin, args...), out: newOutWriter(logf), exited: make(chan struct{})}
	p.cmd.Env = append(os.Environ(), "SUPERSTEP_DEMO_JOURNAL="+c.journal)
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("crash: start server: %w", err)
	}
	go func() { // owned by p: ends when the process exits (kill or stop)
		p.err = p.cmd.Wait()
		logf.Close()
		close(p.exited)
	}()
	if err := p.waitReady(ctx); err != nil {
		_ = p.cmd.Process.Kill()
		<-p.exited
		return fmt.Errorf("crash: server %d (%s): %w; output:\n%s", n, logf.Name(), err, p.out.tail())
	}
	c.mu.Lock()
	c.mu.proc = p
	c.mu.starting += time.Since(began)
	close(c.mu.up)
	c.mu.Unlock()
	return nil
}

// startStats returns the number of starts and their mean duration.
func (c *cluster) startStats() (int, time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.starts, c.mu.starting / time.Duration(max(c.mu.starts, 1))
}

// waitReady waits for the listening address in the output, then for
// /healthz to answer 200.
func (p *proc) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	select {
	case addr := <-p.out.addr:
		p.url = "http://" + addr
	case <-p.exited:
		return fmt.Errorf("exited before listening: %v", p.err)
	case <-ctx.Done():
		return errors.New("no listening address (127.0.0.1:port) in its output within 30s")
	}
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, p.url+"/healthz", nil)
		if resp, err := httpClient.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-p.exited:
			return fmt.Errorf("exited before /healthz answered: %v", p.err)
		case <-ctx.Done():
			return fmt.Errorf("/healthz at %s not 200 within 30s", p.url)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// current returns the URL of the running server, waiting while none is.
func (c *cluster) current(ctx context.Context) (string, error) {
	for {
		c.mu.Lock()
		p, up := c.mu.proc, c.mu.up
		c.mu.Unlock()
		if p != nil {
			return p.url, nil
		}
		select {
		case <-up:
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
}

// detach marks the server down and returns its process.
func (c *cluster) detach() *proc {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.mu.proc
	if p != nil {
		c.mu.proc = nil
		c.mu.up = make(chan struct{})
	}
	return p
}

// kill SIGKILLs the running server and waits for it to be gone. It
// reports whether the process was still running (not exited by itself).
func (c *cluster) kill() (bool, error) {
	p := c.detach()
	if p == nil {
		return false, errors.New("crash: kill: no server running")
	}
	select {
	case <-p.exited:
		return false, fmt.Errorf("crash: server exited by itself before the kill: %v; output:\n%s", p.err, p.out.tail())
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.exited
	return true, nil
}

// stop shuts the running server down with SIGTERM and requires a clean
// exit within grace.
func (c *cluster) stop(grace time.Duration) error {
	p := c.detach()
	if p == nil {
		return nil
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(grace):
		_ = p.cmd.Process.Kill()
		<-p.exited
		return fmt.Errorf("crash: server did not exit within %s of SIGTERM; output:\n%s", grace, p.out.tail())
	}
	if p.err != nil {
		return fmt.Errorf("crash: server exit after SIGTERM: %w; output:\n%s", p.err, p.out.tail())
	}
	return nil
}

// outWriter copies the server's output to a log file, finds the listening
// address and keeps the last lines for failure messages.
type outWriter struct {
	mu    sync.Mutex
	f     *os.File
	line  []byte
	lines [][]byte // last lines
	addr  chan string
	found bool
}

// newOutWriter returns a writer to f.
func newOutWriter(f *os.File) *outWriter {
	return &outWriter{f: f, addr: make(chan string, 1)}
}

// Write implements io.Writer.
func (w *outWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	_, _ = w.f.Write(p)
	w.line = append(w.line, p...)
	for {
		i := bytes.IndexByte(w.line, '\n')
		if i < 0 {
			break
		}
		w.addLine(w.line[:i])
		w.line = w.line[i+1:]
	}
	return len(p), nil
}

// addLine records one complete output line.
func (w *outWriter) addLine(line []byte) {
	if !w.found {
		if m := addrPattern.FindSubmatch(line); m != nil {
			w.found = true
			w.addr <- string(m[1])
		}
	}
	w.lines = append(w.lines, bytes.Clone(line))
	if len(w.lines) > 40 {
		w.lines = w.lines[1:]
	}
}

// tail returns the last lines of output.
func (w *outWriter) tail() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return string(bytes.Join(append(w.lines, w.line), []byte("\n")))
}
