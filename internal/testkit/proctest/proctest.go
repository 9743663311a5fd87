// Package proctest runs real server processes for tests: it builds a main
// package (Build, BuildTemp, or MainWithBinary as a package's TestMain),
// starts the binary as a child process, waits until it listens and
// answers /healthz, signals it (SIGKILL, SIGSTOP and SIGCONT, SIGTERM with
// a grace period) and scrapes its metrics. WorkDir gives a test a place
// for the processes' logs that a -keep flag preserves when it fails.
//
// Every process it starts has one goroutine that waits for it; the
// goroutine ends when the process exits, so a test that kills or
// terminates every process it started leaks nothing.
//
// It is a test harness (see internal/testkit): only tests import it.
package proctest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"sync"
	"syscall"
	"time"
)

// ReadyTimeoutDefault bounds how long Start waits for a process to listen
// and answer its readiness path: generous, since tests run on loaded
// machines with race-enabled binaries.
const ReadyTimeoutDefault = 30 * time.Second

// Build compiles the main package pkg (an import path or a directory) into
// the file out, with -race when race is set.
func Build(ctx context.Context, pkg, out string, race bool) error {
	args := []string{"build", "-o", out}
	if race {
		args = append(args, "-race")
	}
	cmd := exec.CommandContext(ctx, "go", append(args, pkg)...)
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("proctest: go build %s: %w\n%s", pkg, err, buf.Bytes())
	}
	return nil
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago. A
// test that needs to know a server's address before it starts (to match it
// with what the server reports about itself) passes it as the server's
// listen address; another process may take it meanwhile, in which case the
// server fails to start and the test starts it again on another port.
func FreePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("proctest: free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// Options say how Start runs a process.
type Options struct {
	// Bin is the binary and Args its arguments.
	Bin  string
	Args []string
	// Env is added to the test's environment.
	Env []string
	// LogPath, when not empty, receives the process's stdout and stderr.
	LogPath string
	// ReadyPath is the HTTP path that must answer 200 once the process
	// printed its listening address; default "/healthz".
	ReadyPath string
	// ReadyTimeout bounds the wait; default ReadyTimeoutDefault.
	ReadyTimeout time.Duration
	// AddrPattern finds the listening address in the process's output: its
	// first submatch is the host:port. The default takes the first
	// 127.0.0.1:port printed; a process that prints other addresses first
	// (such as a model server it starts) needs a pattern of its own.
	AddrPattern *regexp.Regexp
}

// defaultAddrPattern finds the listening address in the process's output,
// whatever the log format (text "addr=127.0.0.1:4242", JSON, or a URL).
var defaultAddrPattern = regexp.MustCompile(`(127\.0\.0\.1:[1-9][0-9]*)`)

// readyClient keeps no idle connections, so no connection goroutine
// outlives a process.
var readyClient = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 5 * time.Second}

// Proc is one running child process.
type Proc struct {
	cmd    *exec.Cmd
	url    string
	out    *outWriter
	exited chan struct{} // closed once Wait returned
	err    error         // Wait's error, readable after exited
	logf   *os.File
	path   string
}

// Start runs the process and returns once it printed a listening address
// (127.0.0.1:port) and answers ReadyPath with 200. On failure the process
// is killed and the error carries the last lines of its output.
func Start(ctx context.Context, o *Options) (*Proc, error) {
	pattern := o.AddrPattern
	if pattern == nil {
		pattern = defaultAddrPattern
	}
	p := &Proc{out: newOutWriter(pattern), exited: make(chan struct{}), path: o.LogPath}
	var w io.Writer = p.out
	if o.LogPath != "" {
		f, err := os.Create(o.LogPath)
		if err != nil {
			return nil, fmt.Errorf("proctest: log: %w", err)
		}
		p.logf = f
		p.out.file = f
	}
	p.cmd = exec.Command(o.Bin, o.Args...)
	p.cmd.Env = append(os.Environ(), o.Env...)
	p.cmd.Stdout, p.cmd.Stderr = w, w
	if err := p.cmd.Start(); err != nil {
		if p.logf != nil {
			p.logf.Close()
		}
		return nil, fmt.Errorf("proctest: start %s: %w", o.Bin, err)
	}
	go func() { // owned by p: ends when the process exits (killed or stopped)
		p.err = p.cmd.Wait()
		p.out.close()
		close(p.exited)
	}()
	if err := p.waitReady(ctx, o); err != nil {
		_ = p.cmd.Process.Kill()
		<-p.exited
		return nil, fmt.Errorf("proctest: %s (pid %d): %w; output:\n%s", o.Bin, p.cmd.Process.Pid, err, p.Tail())
	}
	return p, nil
}

// waitReady waits for the listening address in the output, then for the
// readiness path to answer 200.
func (p *Proc) waitReady(ctx context.Context, o *Options) error {
	timeout := o.ReadyTimeout
	if timeout <= 0 {
		timeout = ReadyTimeoutDefault
	}
	path := o.ReadyPath
	if path == "" {
		path = "/healthz"
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	select {
	case addr := <-p.out.addr:
		p.url = "http://" + addr
	case <-p.exited:
		return fmt.Errorf("exited before listening: %v", p.err)
	case <-ctx.Done():
		return fmt.Errorf("no listening address (127.0.0.1:port) in its output within %v", timeout)
	}
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, p.url+path, nil)
		if resp, err := readyClient.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-p.exited:
			return fmt.Errorf("exited before %s answered: %v", path, p.err)
		case <-ctx.Done():
			return fmt.Errorf("%s at %s not 200 within %v", path, p.url, timeout)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// URL returns the base URL the process listens on (http://127.0.0.1:port).
func (p *Proc) URL() string { return p.url }

// Pid returns the process id.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Done is closed once the process exited and its output is flushed.
func (p *Proc) Done() <-chan struct{} { return p.exited }

// Err returns the process's exit error (nil for exit status 0); valid once
// Done is closed.
func (p *Proc) Err() error {
	<-p.exited
	return p.err
}

// Kill SIGKILLs the process and waits until it is gone. It fails when the
// process had already exited by itself: a test that meant to kill a
// running server must hear that it was not running.
func (p *Proc) Kill() error {
	select {
	case <-p.exited:
		return fmt.Errorf("proctest: pid %d exited by itself before the kill: %v; output:\n%s", p.Pid(), p.err, p.Tail())
	default:
	}
	// A stopped process dies of SIGKILL too; no SIGCONT needed.
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.exited
	return nil
}

// Stop pauses the process with SIGSTOP: it keeps its sockets and
// database connections but runs no instruction until Cont.
//
// It returns once the kernel shows the process stopped: SIGSTOP is
// delivered asynchronously, and a process that still runs for a moment can
// answer a request the caller sends right after.
func (p *Proc) Stop() error {
	if err := p.signal(syscall.SIGSTOP); err != nil {
		return err
	}
	stat := fmt.Sprintf("/proc/%d/stat", p.Pid())
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		b, err := os.ReadFile(stat)
		if err != nil {
			return nil // no procfs (not Linux): the signal was sent
		}
		// The state follows the command name, which is in parentheses.
		if i := bytes.LastIndexByte(b, ')'); i >= 0 && i+2 < len(b) && (b[i+2] == 'T' || b[i+2] == 't') {
			return nil
		}
		time.Sleep(time.Millisecond) // polling procfs: there is no notification
	}
	return fmt.Errorf("proctest: pid %d not stopped 10s after SIGSTOP", p.Pid())
}

// Cont resumes a process paused by Stop.
func (p *Proc) Cont() error { return p.signal(syscall.SIGCONT) }

// signal sends sig to the running process.
func (p *Proc) signal(sig syscall.Signal) error {
	select {
	case <-p.exited:
		return fmt.Errorf("proctest: pid %d exited before %v: %v", p.Pid(), sig, p.err)
	default:
	}
	if err := p.cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("proctest: pid %d: %v: %w", p.Pid(), sig, err)
	}
	return nil
}

// Terminate sends SIGTERM and requires a clean exit (status 0) within
// grace; past it the process is killed and an error returned.
func (p *Proc) Terminate(grace time.Duration) error {
	select {
	case <-p.exited:
		return fmt.Errorf("proctest: pid %d had exited before SIGTERM: %v; output:\n%s", p.Pid(), p.err, p.Tail())
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-p.exited:
	case <-t.C:
		_ = p.cmd.Process.Kill()
		<-p.exited
		return fmt.Errorf("proctest: pid %d did not exit within %v of SIGTERM; output:\n%s", p.Pid(), grace, p.Tail())
	}
	if p.err != nil {
		return fmt.Errorf("proctest: pid %d exit after SIGTERM: %w; output:\n%s", p.Pid(), p.err, p.Tail())
	}
	return nil
}

// Tail returns the last lines of the process's output.
func (p *Proc) Tail() string { return p.out.tail() }

// Output returns everything the process wrote so far: the log file's
// content when Options.LogPath was set, else its last lines.
func (p *Proc) Output() (string, error) {
	if p.path == "" {
		return p.Tail(), nil
	}
	b, err := os.ReadFile(p.path)
	if err != nil {
		return "", fmt.Errorf("proctest: read log: %w", err)
	}
	return string(b), nil
}

// tailLines is how many lines of output Tail keeps.
const tailLines = 40

// outWriter copies the process's output to its log file, finds the
// listening address and keeps the last lines for failure messages.
type outWriter struct {
	mu     sync.Mutex
	file   *os.File // nil without a log file
	line   []byte
	lines  [][]byte
	addr   chan string
	found  bool
	closed bool
	// pattern finds the listening address.
	pattern *regexp.Regexp
}

// newOutWriter returns a writer with no log file that looks for pattern.
func newOutWriter(pattern *regexp.Regexp) *outWriter {
	return &outWriter{addr: make(chan string, 1), pattern: pattern}
}

// Write implements io.Writer.
func (w *outWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.file != nil && !w.closed {
		_, _ = w.file.Write(p)
	}
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
		if m := w.pattern.FindSubmatch(line); m != nil {
			w.found = true
			w.addr <- string(m[1])
		}
	}
	w.lines = append(w.lines, bytes.Clone(line))
	if len(w.lines) > tailLines {
		w.lines = w.lines[1:]
	}
}

// close closes the log file once the process exited (exec.Cmd has copied
// all its output by then).
func (w *outWriter) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.file != nil && !w.closed {
		_ = w.file.Close()
	}
	w.closed = true
}

// tail returns the last lines of output.
func (w *outWriter) tail() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return string(bytes.Join(append(w.lines, w.line), []byte("\n")))
}
