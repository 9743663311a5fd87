package multihost

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/superstep/superstep/internal/testkit/pgtest"
	"github.com/superstep/superstep/internal/testkit/proctest"
	"github.com/superstep/superstep/internal/testkit/verifytest"
	"github.com/superstep/superstep/protocol"
	"github.com/superstep/superstep/store"
	"github.com/superstep/superstep/store/postgres"
)

// hostCount is how many hosts every test runs.
const hostCount = 3

// httpClient keeps no idle connections: servers die under them, and no
// connection goroutine outlives a test.
var httpClient = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}

// openStore opens the test's database in the test process (the hosts keep
// running: PostgreSQL is shared).
func openStore(t testing.TB, db string) store.Store {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := postgres.Open(ctx, db, &postgres.Options{MaxConns: 4})
	if err != nil {
		t.Fatalf("open %s: %v", db, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// hostProc is one `superstep serve` process of a cluster.
type hostProc struct {
	slot int
	gen  int    // starts of the slot before this one
	addr string // its --addr, 127.0.0.1:port
	id   string // its host id, as GET /v1/hosts names it
	proc *proctest.Proc
}

// url returns the host's base URL.
func (h *hostProc) url() string { return h.proc.URL() }

// cluster runs hostCount `superstep serve` processes on one database, each
// in a slot that the test may kill and restart (a new process with a new
// host id on a new port).
type cluster struct {
	t       testing.TB
	dir     string
	db      string
	journal string
	args    []string // added to every `superstep serve`
	env     []string // added to every `superstep serve`'s environment
	mu      struct {
		sync.Mutex
		hosts   []*hostProc // nil while the slot is down
		starts  int
		changed chan struct{} // closed and replaced when a host comes up
		rng     *rand.Rand
		procs   []*hostProc // every process started, for cleanup
	}
}

// newCluster returns a cluster on a database of its own (dropped when t
// ends) writing its journal and logs in a work directory (kept under
// -keep when t fails). The hosts are started with start.
func newCluster(t testing.TB, seed uint64, args ...string) *cluster {
	db := pgtest.Database(t, "superstep_multihost")
	dir := proctest.WorkDir(t, *flagKeep, "superstep-multihost")
	c := &cluster{t: t, dir: dir, db: db, journal: filepath.Join(dir, "journal"), args: args}
	c.mu.hosts = make([]*hostProc, hostCount)
	c.mu.changed = make(chan struct{})
	c.mu.rng = rand.New(rand.NewPCG(seed, 0xc1))
	t.Cleanup(func() {
		c.mu.Lock()
		procs := c.mu.procs
		c.mu.Unlock()
		for _, h := range procs {
			select {
			case <-h.proc.Done():
			default:
				_ = h.proc.Kill()
			}
		}
	})
	return c
}

// startAll starts every slot.
func (c *cluster) startAll(ctx context.Context) {
	for i := range hostCount {
		if _, err := c.start(ctx, i); err != nil {
			c.t.Fatal(err)
		}
	}
}

// start runs a fresh process in slot i and returns once it serves
// /healthz and its host id is known. A port taken between FreePort and
// the server's listen is retried on another port.
func (c *cluster) start(ctx context.Context, i int) (*hostProc, error) {
	var errs []error
	for attempt := 0; attempt < 3; attempt++ {
		h, err := c.startOnce(ctx, i)
		if err == nil {
			return h, nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	return nil, errors.Join(errs...)
}

// startOnce makes one attempt of start.
func (c *cluster) startOnce(ctx context.Context, i int) (*hostProc, error) {
	port, err := proctest.FreePort()
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.mu.starts++
	n := c.mu.starts
	c.mu.Unlock()
	h := &hostProc{slot: i, gen: n, addr: fmt.Sprintf("127.0.0.1:%d", port)}
	keys := filepath.Join(c.dir, "api-keys")
	if err := os.WriteFile(keys, []byte(apiKey+"\n"), 0o600); err != nil {
		return nil, fmt.Errorf("multihost: api keys: %w", err)
	}
	args := append([]string{"serve", "--db", c.db, "--addr", h.addr, "--log-format", "json",
		"--admin-keys", keys, "--max-streams-per-key", "0"}, c.args...)
	h.proc, err = proctest.Start(ctx, &proctest.Options{Bin: binary, Args: args,
		Env:     append([]string{"SUPERSTEP_DEMO_JOURNAL=" + c.journal}, c.env...),
		LogPath: filepath.Join(c.dir, fmt.Sprintf("host%d-start%03d.log", i, n))})
	if err != nil {
		return nil, fmt.Errorf("multihost: start host %d: %w", i, err)
	}
	c.mu.Lock()
	c.mu.procs = append(c.mu.procs, h)
	c.mu.Unlock()
	if h.id, err = hostID(ctx, h); err != nil {
		_ = h.proc.Kill()
		return nil, err
	}
	c.mu.Lock()
	c.mu.hosts[i] = h
	close(c.mu.changed)
	c.mu.changed = make(chan struct{})
	c.mu.Unlock()
	return h, nil
}

// getHosts reads GET /v1/hosts from base.
func getHosts(ctx context.Context, base string) (*protocol.HostList, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/hosts", nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+apiKey)
	resp, err := httpClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("multihost: GET %s/v1/hosts: %w", base, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("multihost: GET %s/v1/hosts: %w", base, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("multihost: GET %s/v1/hosts: %s %s", base, resp.Status, body)
	}
	var out protocol.HostList
	if err := json.Unmarshal(body, &out); err != nil {
		return nil, fmt.Errorf("multihost: GET %s/v1/hosts: %w in %s", base, err, body)
	}
	return &out, nil
}

// hostID asks a fresh host for its own id: the /v1/hosts entry carrying
// its --addr (or, should the listing name no address, its pid, which the
// default host id holds).
func hostID(ctx context.Context, h *hostProc) (string, error) {
	reply, err := getHosts(ctx, h.url())
	if err != nil {
		return "", err
	}
	pid := fmt.Sprintf("-%d-", h.proc.Pid())
	for _, e := range reply.Data {
		if e.Addr == h.addr {
			return e.ID, nil
		}
	}
	for _, e := range reply.Data {
		if strings.Contains(e.ID, pid) {
			return e.ID, nil
		}
	}
	return "", fmt.Errorf("multihost: GET %s/v1/hosts names no host with addr %s or pid %d: %+v", h.url(), h.addr, h.proc.Pid(), reply.Data)
}

// host returns the process of slot i (nil while it is down).
func (c *cluster) host(i int) *hostProc {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.hosts[i]
}

// byID returns the running host with the given id (nil if none).
func (c *cluster) byID(id string) *hostProc {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, h := range c.mu.hosts {
		if h != nil && h.id == id {
			return h
		}
	}
	return nil
}

// upSlots returns the slots whose host is up.
func (c *cluster) upSlots() []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	var up []int
	for i, h := range c.mu.hosts {
		if h != nil {
			up = append(up, i)
		}
	}
	return up
}

// pick returns the URL of a random running host other than avoid (a URL
// whose connection just broke), waiting while there is none.
func (c *cluster) pick(ctx context.Context, avoid string) (string, error) {
	for {
		c.mu.Lock()
		var urls []string
		for _, h := range c.mu.hosts {
			if h != nil && h.url() != avoid {
				urls = append(urls, h.url())
			}
		}
		changed := c.mu.changed
		if len(urls) > 0 {
			u := urls[c.mu.rng.IntN(len(urls))]
			c.mu.Unlock()
			return u, nil
		}
		c.mu.Unlock()
		select {
		case <-changed:
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(100 * time.Millisecond):
			// avoid may have been a live host whose connection broke for
			// another reason: after a while it is fine again.
			avoid = ""
		}
	}
}

// detach marks slot i down and returns its process.
func (c *cluster) detach(i int) *hostProc {
	c.mu.Lock()
	defer c.mu.Unlock()
	h := c.mu.hosts[i]
	c.mu.hosts[i] = nil
	return h
}

// kill SIGKILLs the host of slot i and waits until it is gone.
func (c *cluster) kill(i int) (*hostProc, error) {
	h := c.detach(i)
	if h == nil {
		return nil, fmt.Errorf("multihost: kill: host %d is down", i)
	}
	if err := h.proc.Kill(); err != nil {
		return nil, fmt.Errorf("multihost: host %d: %w", i, err)
	}
	return h, nil
}

// stopAll shuts every running host down with SIGTERM and requires each to
// exit cleanly within grace.
func (c *cluster) stopAll(grace time.Duration) error {
	var wg sync.WaitGroup
	errs := make([]error, hostCount)
	for i := range hostCount {
		h := c.detach(i)
		if h == nil {
			continue
		}
		wg.Go(func() {
			if err := h.proc.Terminate(grace); err != nil {
				errs[i] = fmt.Errorf("host %d (%s): %w", i, h.id, err)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// logsContaining returns the number of lines of every process's log that
// contain s, by host id.
func (c *cluster) logsContaining(s string) map[string]int {
	c.mu.Lock()
	procs := c.mu.procs
	c.mu.Unlock()
	out := map[string]int{}
	for _, h := range procs {
		text, err := h.proc.Output()
		if err != nil {
			c.t.Errorf("host %s: %v", h.id, err)
			continue
		}
		if n := strings.Count(text, s); n > 0 {
			out[h.id] += n
		}
	}
	return out
}

// checkCommand runs `superstep check` on the cluster's database and
// requires success.
func (c *cluster) checkCommand(ctx context.Context) {
	verifytest.CheckCommand(ctx, c.t, binary, c.db)
}

// scrape reads one host's metrics.
func scrape(ctx context.Context, h *hostProc) (map[string]float64, error) {
	m, err := proctest.Scrape(ctx, h.url())
	if err != nil {
		return nil, fmt.Errorf("multihost: host %d (%s): %w", h.slot, h.id, err)
	}
	return m, nil
}

// seedOf returns the -seed flag or one from the clock, and logs it.
func seedOf(t testing.TB) uint64 {
	seed := *flagSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (replay: -run '^%s$' -seed %d)", seed, t.Name(), seed)
	return seed
}
