package crash

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/superstep/superstep/internal/testkit/proctest"
)

// addrPattern finds the listening address in the server's output: the
// line serve prints on stdout whatever the log format (the logs may name
// other addresses first, such as the local model server's).
var addrPattern = regexp.MustCompile(`listening on http://(127\.0\.0\.1:[1-9][0-9]*)`)

// cluster runs the server binary on one database, one process at a time,
// and lets clients wait for the current one to be up.
type cluster struct {
	bin, db, journal, dir string
	extraArgs             []string
	// key is the only API key the cluster's servers accept, made for this
	// cluster: a client holding the address of a killed server may reach
	// another test's server that took its port meanwhile, which then
	// refuses it with 401 (resumeclient retries it elsewhere) instead of
	// serving it from the wrong database.
	key     string
	keysErr error // writing the key file failed: start reports it
	mu      struct {
		sync.Mutex
		proc     *proctest.Proc
		up       chan struct{} // closed when proc is up
		starts   int
		starting time.Duration // total time from exec to /healthz 200
		// startedAt[i] is when start i began (before its exec); downAt[i]
		// when process i was detached to be killed or stopped. A model
		// connection accepted at or after startedAt[i] is process i's or a
		// later one's (journal_test.go tells processes apart by them).
		startedAt, downAt []time.Time
	}
	// deltas counts the text deltas clients received (kills in live mode
	// wait for tokens to be streaming).
	deltas atomic.Int64
}

// newCluster returns a cluster for db writing its journal and logs in dir.
func newCluster(bin, db, dir string, extraArgs ...string) *cluster {
	c := &cluster{bin: bin, db: db, journal: filepath.Join(dir, "journal"), dir: dir, key: fmt.Sprintf("crash-%016x", rand.Uint64())}
	keys := filepath.Join(dir, "api-keys")
	c.extraArgs = append(slices.Clone(extraArgs), "--api-keys", keys, "--max-streams-per-key", "0")
	c.keysErr = os.WriteFile(keys, []byte(c.key+" "+keyOwner+"\n"), 0o600)
	c.mu.up = make(chan struct{})
	return c
}

// start runs a fresh server process on the database and returns once it
// serves /healthz.
func (c *cluster) start(ctx context.Context) error {
	if c.keysErr != nil {
		return fmt.Errorf("crash: api keys: %w", c.keysErr)
	}
	began := time.Now()
	c.mu.Lock()
	c.mu.starts++
	n := c.mu.starts
	c.mu.startedAt = append(c.mu.startedAt, began)
	c.mu.Unlock()
	p, err := proctest.Start(ctx, &proctest.Options{Bin: c.bin,
		Args:        append([]string{"serve", "--db", c.db, "--addr", "127.0.0.1:0"}, c.extraArgs...),
		Env:         []string{"SUPERSTEP_DEMO_JOURNAL=" + c.journal},
		LogPath:     filepath.Join(c.dir, fmt.Sprintf("server-%03d.log", n)),
		AddrPattern: addrPattern})
	if err != nil {
		return fmt.Errorf("crash: server %d: %w", n, err)
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

// current returns the URL of the running server, waiting while none is.
func (c *cluster) current(ctx context.Context) (string, error) {
	for {
		c.mu.Lock()
		p, up := c.mu.proc, c.mu.up
		c.mu.Unlock()
		if p != nil {
			return p.URL(), nil
		}
		select {
		case <-up:
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
}

// host is current as a resumeclient.Stream's Host: with one server there
// is no other to go to.
func (c *cluster) host(ctx context.Context, _ string) (string, error) { return c.current(ctx) }

// detach marks the server down and returns its process.
func (c *cluster) detach() *proctest.Proc {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.mu.proc
	if p != nil {
		c.mu.downAt = append(c.mu.downAt, time.Now())
		c.mu.proc = nil
		c.mu.up = make(chan struct{})
	}
	return p
}

// kill SIGKILLs the running server and waits for it to be gone. It fails
// when the process had exited by itself.
func (c *cluster) kill() error {
	p := c.detach()
	if p == nil {
		return errors.New("crash: kill: no server running")
	}
	if err := p.Kill(); err != nil {
		return fmt.Errorf("crash: %w", err)
	}
	return nil
}

// stop shuts the running server down with SIGTERM and requires a clean
// exit within grace.
func (c *cluster) stop(grace time.Duration) error {
	p := c.detach()
	if p == nil {
		return nil
	}
	if err := p.Terminate(grace); err != nil {
		return fmt.Errorf("crash: %w", err)
	}
	return nil
}

// killAtCleanup kills whatever server still runs when the test ends (it
// failed before stopping it).
func (c *cluster) killAtCleanup() {
	if p := c.detach(); p != nil {
		select {
		case <-p.Done():
		default:
			_ = p.Kill()
		}
	}
}

// processTimes returns when each server process started and (for those no
// longer running) when it was taken down.
func (c *cluster) processTimes() (started, down []time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.mu.startedAt), slices.Clone(c.mu.downAt)
}
