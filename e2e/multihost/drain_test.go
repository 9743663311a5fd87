package multihost

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/superstep/superstep/internal/testkit/resumeclient"
	"github.com/superstep/superstep/store"
	"github.com/superstep/superstep/verify"
)

// drainLease is long, so that a handover that waited for the lease to
// expire (two thirds of it at least) is told apart from one that did not
// (a claim comes every third of it).
const drainLease = 15 * time.Second

var drainConfig = config{name: "silent-200", model: "demo.silent", meta: map[string]string{"steps": "200"}}

// TestMultihost_Drain sends SIGTERM to a host driving two runs while
// their creating clients stream from it. The host must exit cleanly and
// hand the runs over at once: another host continues each before two
// thirds of the lease could have expired, no superstep runs twice (the
// drained host commits the running one before it lets go), and the
// clients, whose streams the drain ended, resume on another host with
// starting_after and see exactly the log.
func TestMultihost_Drain(t *testing.T) {
	seed := seedOf(t)
	began := time.Now()
	cl := newCluster(t, seed, "--lease", drainLease.String())
	st := openStore(t, cl.db)
	ctx, cancel := context.WithTimeout(context.Background(), 180*time.Second)
	defer cancel()
	cl.startAll(ctx)
	checkListing(ctx, t, cl, nil)

	ref := pinnedStream("reference", cl.host(1).url())
	refOut := referenceOutcome(t, drainConfig.name, ref, ref.Create(ctx, drainConfig.params(1)))

	// Two runs created on host 0, streamed from it by their creators,
	// which go to another host once the drain ends their streams.
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
	}()
	h0 := cl.host(0)
	streams := make([]*stream, 2)
	errs := make([]error, len(streams))
	ids := make(chan string, len(streams))
	for i := range streams {
		s := pinnedStream(fmt.Sprintf("creator-%d", i), h0.url())
		s.OnID = func(id string) { ids <- id }
		streams[i] = s
		wg.Go(func() {
			errs[i] = s.Create(ctx, drainConfig.params(20))
			s.Host = cl.pick // reconnect anywhere but the drained host
			if errs[i] == nil && !s.Terminal {
				errs[i] = s.Follow(ctx)
			}
		})
	}
	runIDs := make([]string, len(streams))
	for i := range streams {
		var id string
		select {
		case id = <-ids:
		case <-ctx.Done():
			t.Fatal("no response.created from host 0")
		}
		resp, err := st.ResponseGet(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		runIDs[i] = resp.RunID
		waitRun(ctx, t, st, resp.RunID, "to commit 3 steps", func(run *store.Run) bool {
			return run.LastStep >= 3 && run.Lease.Owner != ""
		})
	}
	first, err := st.RunGet(ctx, runIDs[0])
	if err != nil {
		t.Fatal(err)
	}
	victim := cl.byID(first.Lease.Owner)
	if victim == nil {
		t.Fatalf("run %s is driven by %q, not one of the hosts", first.ID, first.Lease.Owner)
	}
	epochs := map[string]int64{}
	for _, id := range runIDs {
		run, err := st.RunGet(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if run.Lease.Owner == victim.id {
			epochs[id] = run.Lease.Epoch
		}
	}

	cl.detach(victim.slot)
	termAt := time.Now()
	if err := victim.proc.Terminate(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	exited := time.Since(termAt)
	for id, epoch := range epochs {
		// The drained host's last commit is the run's LastStep once it
		// exited; the new owner's first commit comes after it.
		run, err := st.RunGet(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if run.Lease.Epoch == epoch && run.Lease.Owner != "" {
			t.Errorf("run %s still leased to the drained host %s after it exited: %+v", id, victim.id, run.Lease)
		}
		waitRun(ctx, t, st, id, "to be continued by another host", func(r *store.Run) bool {
			return r.Lease.Epoch > epoch && r.LastStep > run.LastStep
		})
		handover := time.Since(termAt)
		t.Logf("run %s: the drained host exited %v after SIGTERM; another host committed after %v",
			id, exited.Round(time.Millisecond), handover.Round(time.Millisecond))
		if handover >= drainLease*2/3 {
			t.Errorf("run %s was continued %v after SIGTERM: no sooner than an expired lease (--lease %v), so the drain did not release it",
				id, handover.Round(time.Millisecond), drainLease)
		}
	}
	checkListing(ctx, t, cl, victim)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("client %d: %v", i, err)
		}
	}
	if err := cl.stopAll(30 * time.Second); err != nil {
		t.Error(err)
	}

	clients := resumeclient.ViewsByID(append(streams, ref)...)
	entries, err := verify.ReadJournal(cl.journal)
	if err != nil {
		t.Fatal(err)
	}
	// No crash: not one superstep may run twice.
	in := &verify.Input{Journal: &verify.Journal{Entries: entries}}
	loadResponses(ctx, t, st, in, clients, map[string]verify.Outcome{drainConfig.name: refOut})
	rep := verify.Check(in)
	t.Logf("%v", rep)
	if err := rep.Err(); err != nil {
		t.Error(err)
	}
	cl.checkCommand(ctx)
	t.Logf("took %v", time.Since(began).Round(time.Millisecond))
}

// checkListing requires GET /v1/hosts on every running host to list every
// running host with its --addr, whether it drives runs or not, and not
// gone (a drained host, which leaves the registry at shutdown); and
// `superstep hosts` to print the same ids. Hosts register at start and
// every third of the lease, so it waits up to 30s.
func checkListing(ctx context.Context, t *testing.T, cl *cluster, gone *hostProc) {
	t.Helper()
	var up []*hostProc
	for _, i := range cl.upSlots() {
		up = append(up, cl.host(i))
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, h := range up {
		for {
			problem := listingProblem(ctx, h, up, gone)
			if problem == "" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("GET /v1/hosts on host %s: %s", h.id, problem)
			}
			sleep(ctx, 50*time.Millisecond)
		}
	}
	out, err := exec.CommandContext(ctx, binary, "hosts", "--addr", up[0].addr, "--api-key", apiKey).CombinedOutput()
	if err != nil {
		t.Fatalf("superstep hosts --addr %s: %v\n%s", up[0].addr, err, out)
	}
	for _, h := range up {
		if !strings.Contains(string(out), h.id) || !strings.Contains(string(out), h.addr) {
			t.Errorf("superstep hosts --addr %s does not show host %s at %s:\n%s", up[0].addr, h.id, h.addr, out)
		}
	}
}

// listingProblem says what is wrong with h's GET /v1/hosts ("" if
// nothing).
func listingProblem(ctx context.Context, h *hostProc, up []*hostProc, gone *hostProc) string {
	reply, err := getHosts(ctx, h.url())
	if err != nil {
		return err.Error()
	}
	addrs := map[string]string{}
	for _, e := range reply.Data {
		addrs[e.ID] = e.Addr
	}
	for _, o := range up {
		if addrs[o.id] != o.addr {
			return fmt.Sprintf("host %s listed with addr %q, want %q: %+v", o.id, addrs[o.id], o.addr, reply.Data)
		}
	}
	if gone != nil {
		if _, ok := addrs[gone.id]; ok {
			return fmt.Sprintf("the drained host %s is still listed: %+v", gone.id, reply.Data)
		}
	}
	return ""
}
