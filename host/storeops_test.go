package host_test

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/superstep/superstep/agent"
	"github.com/superstep/superstep/examples"
	"github.com/superstep/superstep/host"
	"github.com/superstep/superstep/protocol"
	"github.com/superstep/superstep/store"
	"github.com/superstep/superstep/store/storetest"
	"github.com/superstep/superstep/workflow"
)

// opsStore counts the host's store calls: writes by kind, and reads made
// on contexts marked with readerKey (a reader's), whatever else the host
// reads meanwhile.
type opsStore struct {
	store.Store
	commits, creates, releases, appends atomic.Int64
	reads, gets                         atomic.Int64 // gets: the reads that were ResponseGet
}

type readerKey struct{}

func (s *opsStore) Commit(ctx context.Context, p *store.CommitParams) (*store.CommitResult, error) {
	s.commits.Add(1)
	return s.Store.Commit(ctx, p)
}

func (s *opsStore) ResponseCreate(ctx context.Context, p *store.ResponseCreateParams) (*store.ResponseCreateResult, error) {
	s.creates.Add(1)
	return s.Store.ResponseCreate(ctx, p)
}

func (s *opsStore) LeaseRelease(ctx context.Context, p *store.LeaseParams) error {
	s.releases.Add(1)
	return s.Store.LeaseRelease(ctx, p)
}

func (s *opsStore) EventAppend(ctx context.Context, p *store.EventAppendParams) error {
	s.appends.Add(1)
	return s.Store.EventAppend(ctx, p)
}

func (s *opsStore) read(ctx context.Context) {
	if ctx.Value(readerKey{}) != nil {
		s.reads.Add(1)
	}
}

func (s *opsStore) ResponseGet(ctx context.Context, id string) (*store.Response, error) {
	if ctx.Value(readerKey{}) != nil {
		s.gets.Add(1)
	}
	s.read(ctx)
	return s.Store.ResponseGet(ctx, id)
}

func (s *opsStore) EventList(ctx context.Context, p *store.EventListParams) ([]store.Event, error) {
	s.read(ctx)
	return s.Store.EventList(ctx, p)
}

func (s *opsStore) EventWait(ctx context.Context, id string, after int64) error {
	s.read(ctx)
	return s.Store.EventWait(ctx, id, after)
}

// A one-step response costs its create and one commit, which also gives
// the run's lease up (store.CommitParams.Release): no LeaseRelease
// follows it, and the lease is free in the store at once.
func TestHost_OneStepResponseWrites(t *testing.T) {
	forEachBackend(t, func(t *testing.T, be testDB) {
		s := &opsStore{Store: be.open(t)}
		defer s.Close()
		h := newHost(t, s, nil, registerDemos)
		const n = 5
		for range n {
			r := create(t, h, examples.Echo, "hello", nil)
			if final := wait(t, h, r.ID); final.Status != store.StatusCompleted {
				t.Fatalf("status %s", final.Status)
			}
			h.WaitRunExited(t)
			run, err := s.RunGet(testCtx(t), r.RunID)
			if err != nil || run.Lease.Owner != "" || run.Active {
				t.Fatalf("run after its response finished: %+v (%v); want unowned, inactive", run, err)
			}
		}
		shutdown(t, h)
		t.Logf("%d one-step responses: %d creates, %d commits, %d lease releases, %d appends",
			n, s.creates.Load(), s.commits.Load(), s.releases.Load(), s.appends.Load())
		if s.creates.Load() != n || s.commits.Load() != n || s.releases.Load() != 0 {
			t.Fatalf("writes for %d one-step responses: %d creates, %d commits, %d lease releases; want %d, %d, 0",
				n, s.creates.Load(), s.commits.Load(), s.releases.Load(), n, n)
		}
	})
}

// tickerModel yields "tick <i>" at supersteps 1..steps (metadata steps),
// each after step_delay_ms: a message item per superstep.
const tickerModel = "test.ticker"

func registerTicker(t *testing.T, h *host.Host) {
	t.Helper()
	loop := workflow.Func("tick", func(c *workflow.Context, n int) error {
		md := c.Invocation().Metadata
		steps, _ := strconv.Atoi(md["steps"])
		delay, _ := strconv.Atoi(md["step_delay_ms"])
		time.Sleep(time.Duration(delay) * time.Millisecond)
		if err := c.Yield(fmt.Sprintf("tick %d", n)); err != nil {
			return err
		}
		if n < steps {
			return c.Send(n + 1)
		}
		return nil
	})
	start := workflow.Func("start", func(c *workflow.Context, _ string) error { return c.Send(1) })
	wf, err := workflow.NewBuilder(tickerModel).SetStart(start).AddEdge(start, loop).AddEdge(loop, loop).Outputs(loop).Build()
	if err != nil {
		t.Fatal(err)
	}
	if err := h.RegisterWorkflow(tickerModel, wf); err != nil {
		t.Fatal(err)
	}
}

// readAll reads the response's events from after -1 to the terminal one
// through h.Events on a reader context; pause, if set, is called after
// the first event.
func readAll(t *testing.T, h *host.Host, id string, pause func()) []store.Event {
	t.Helper()
	ctx := context.WithValue(testCtx(t), readerKey{}, true)
	var evs []store.Event
	for ev, err := range h.Events(ctx, id, "", -1) {
		if err != nil {
			t.Fatalf("Events after %d events: %v", len(evs), err)
		}
		evs = append(evs, ev)
		if len(evs) == 1 && pause != nil {
			pause()
		}
	}
	return evs
}

// requireLog fails unless evs is the response's whole log as the store
// has it: every event, in order, with its type, payload and step.
func requireLog(t *testing.T, s store.Store, id string, evs []store.Event) {
	t.Helper()
	want := storetest.ListAll(testCtx(t), t, s, id)
	if len(evs) != len(want) {
		t.Fatalf("reader got %d events, the log holds %d", len(evs), len(want))
	}
	for i := range want {
		if g, w := evs[i], want[i]; g.Seq != w.Seq || g.Type != w.Type || g.Step != w.Step || g.ResponseID != w.ResponseID ||
			!bytes.Equal(g.Payload, w.Payload) {
			t.Fatalf("event %d: reader got %+v, the log holds %+v", i, g, w)
		}
	}
	if !terminal(want[len(want)-1].Type) {
		t.Fatalf("the log ends with %s", want[len(want)-1].Type)
	}
}

// A reader of a run driven here gets the events of each superstep from
// the host's memory once they are committed, not by reading the store
// after every commit: a handful of reads for the whole response, and the
// same events, in the same order, as the log.
func TestHost_EventsLocalRunFromMemory(t *testing.T) {
	forEachBackend(t, func(t *testing.T, be testDB) {
		s := &opsStore{Store: be.open(t)}
		defer s.Close()
		h := newHost(t, s, nil, func(t *testing.T, h *host.Host) { registerDemos(t, h); registerTicker(t, h) })
		defer shutdown(t, h)
		const steps = 30
		r := create(t, h, tickerModel, "x", map[string]string{"steps": strconv.Itoa(steps), "step_delay_ms": "3"})
		evs := readAll(t, h, r.ID, nil)
		requireLog(t, s, r.ID, evs)
		t.Logf("%s: %d events, %d commits, %d reader store reads", be.name, len(evs), s.commits.Load(), s.reads.Load())
		if n := s.reads.Load(); n > 4 {
			t.Fatalf("the reader made %d store reads for a %d-superstep run driven here", n, steps)
		}
	})
}

// Live publication: text deltas appended outside commits reach a reader
// here from memory too, once each append returned.
func TestHost_EventsLiveFromMemory(t *testing.T) {
	forEachBackend(t, func(t *testing.T, be testDB) {
		s := &opsStore{Store: be.open(t)}
		defer s.Close()
		h := newHost(t, s, nil, registerDemos)
		defer shutdown(t, h)
		r := create(t, h, examples.Stream, strings.Repeat("word ", 200), map[string]string{"publication": "live", "step_delay_ms": "1"})
		evs := readAll(t, h, r.ID, nil)
		requireLog(t, s, r.ID, evs)
		t.Logf("%s: %d events, %d live appends, %d reader store reads", be.name, len(evs), s.appends.Load(), s.reads.Load())
		if n := s.reads.Load(); n > 4 {
			t.Fatalf("the reader made %d store reads for a live response driven here (%d appends)", n, s.appends.Load())
		}
	})
}

// EventsStarted, the reader of a response its caller just created (a
// streamed POST), does not read the response back from the store (its
// row holds the request): the same log as Events, without Events'
// ResponseGet.
func TestHost_EventsStartedReadsNoResponse(t *testing.T) {
	forEachBackend(t, func(t *testing.T, be testDB) {
		s := &opsStore{Store: be.open(t)}
		defer s.Close()
		h := newHost(t, s, nil, func(t *testing.T, h *host.Host) { registerDemos(t, h); registerTicker(t, h) })
		defer shutdown(t, h)
		r := create(t, h, tickerModel, "x", map[string]string{"steps": "5", "step_delay_ms": "3"})
		ctx := context.WithValue(testCtx(t), readerKey{}, true)
		var evs []store.Event
		for ev, err := range h.EventsStarted(ctx, r, -1) {
			if err != nil {
				t.Fatalf("EventsStarted after %d events: %v", len(evs), err)
			}
			evs = append(evs, ev)
		}
		requireLog(t, s, r.ID, evs)
		if n := s.gets.Load(); n != 0 {
			t.Fatalf("EventsStarted read the response %d times", n)
		}
		readAll(t, h, r.ID, nil)
		if n := s.gets.Load(); n != 1 {
			t.Fatalf("Events read the response %d times, want 1 (its owner check)", n)
		}
	})
}

// A live response whose text is long enough to be spliced into its done
// frames (protocol.SpliceMin) reaches a reader here, from memory, as the
// store's log holds it, byte for byte: the feed makes spliced frames whole
// and the store wrote them whole.
func TestHost_EventsLiveLongText(t *testing.T) {
	forEachBackend(t, func(t *testing.T, be testDB) {
		s := &opsStore{Store: be.open(t)}
		defer s.Close()
		h := newHost(t, s, nil, registerDemos)
		defer shutdown(t, h)
		text := strings.Repeat("word ", 2*protocol.SpliceMin/5)
		r := create(t, h, examples.Stream, text, map[string]string{"publication": "live", "step_delay_ms": "0"})
		evs := readAll(t, h, r.ID, nil)
		requireLog(t, s, r.ID, evs)
		var done [][]byte
		for _, ev := range evs {
			if ev.Type == protocol.EventOutputTextDone {
				done = append(done, ev.Payload)
			}
		}
		// The reply's text, then superstep 2's "done".
		if len(done) != 2 || !bytes.Contains(done[0], []byte(text+" one two three")) {
			t.Fatalf("%d output_text.done events; the first (%d bytes) should hold the %d-byte reply", len(done), len(done[0]), len(text))
		}
	})
}

// Frames yields a long reply's frames from the run's memory still spliced
// (FramesStarted, right after the create, as a stream does), and each,
// written out piece by piece, is the event the store's log holds.
func TestHost_FramesKeepLongTextSpliced(t *testing.T) {
	forEachBackend(t, func(t *testing.T, be testDB) {
		s := &opsStore{Store: be.open(t)}
		defer s.Close()
		// The reply waits until the reader has its first frame, so its
		// frames reach the feed while the reader reads it, however late
		// the reader starts: a reader that starts after the reply's
		// commit reads what it missed from the store, unspliced.
		gate := make(chan struct{})
		h := newHost(t, s, nil, func(t *testing.T, h *host.Host) { registerHeldReply(t, h, gate) })
		defer shutdown(t, h)
		text := strings.Repeat("word ", 2*protocol.SpliceMin/5)
		r := create(t, h, heldReplyModel, text, nil)
		var evs []store.Event
		spliced, released := 0, false
		for f, err := range h.FramesStarted(testCtx(t), r, -1) {
			if err != nil {
				t.Fatalf("Frames after %d frames: %v", len(evs), err)
			}
			if len(f.Splices) > 0 {
				spliced++
			}
			if !released {
				close(gate)
				released = true
			}
			var w bytes.Buffer
			if _, err := f.WriteTo(&w); err != nil {
				t.Fatal(err)
			}
			if w.Len() != f.Len() {
				t.Fatalf("frame %d: WriteTo wrote %d bytes, Len is %d", f.Seq, w.Len(), f.Len())
			}
			evs = append(evs, store.Event{ResponseID: r.ID, Seq: f.Seq, Type: f.Type, Payload: w.Bytes()})
		}
		if spliced < 4 {
			t.Errorf("%d frames came spliced; the reply's delta, text done, part done and item done should", spliced)
		}
		want := storetest.ListAll(testCtx(t), t, s, r.ID)
		if len(evs) != len(want) {
			t.Fatalf("Frames yielded %d events, the log holds %d", len(evs), len(want))
		}
		for i := range want {
			if g, w := evs[i], want[i]; g.Seq != w.Seq || g.Type != w.Type || !bytes.Equal(g.Payload, w.Payload) {
				t.Fatalf("frame %d (%s): written out it differs from the log's event", g.Seq, g.Type)
			}
		}
	})
}

// heldReplyModel waits for gate, then streams its input back word by word
// as superstep 1's reply; superstep 2 yields "done".
const heldReplyModel = "test.heldreply"

func registerHeldReply(t *testing.T, h *host.Host, gate <-chan struct{}) {
	t.Helper()
	reply := workflow.Map("reply", func(c *workflow.Context, in string) (string, error) {
		if err := waitFor(c.Context(), gate, "the reader"); err != nil {
			return "", err
		}
		for _, w := range strings.SplitAfter(in, " ") {
			if err := c.EmitLive(agent.Update{Kind: agent.UpdateTextDelta, Text: w}); err != nil {
				return "", err
			}
		}
		return in, nil
	})
	finish := workflow.Map("finish", func(c *workflow.Context, _ string) (string, error) { return "done", nil })
	wf, err := workflow.NewBuilder(heldReplyModel).SetStart(reply).AddEdge(reply, finish).Outputs(reply, finish).Build()
	if err != nil {
		t.Fatal(err)
	}
	if err := h.RegisterWorkflow(heldReplyModel, wf); err != nil {
		t.Fatal(err)
	}
}

// A reader that falls behind the tail the host keeps in memory reads the
// store until it catches up, and still gets the whole log once.
func TestHost_EventsBehindMemoryTail(t *testing.T) {
	forEachBackend(t, func(t *testing.T, be testDB) {
		s := &opsStore{Store: be.open(t)}
		defer s.Close()
		h := newHost(t, s, nil, func(t *testing.T, h *host.Host) { registerDemos(t, h); registerTicker(t, h) })
		defer shutdown(t, h)
		const steps = 120 // several events each: well past the tail's bound
		r := create(t, h, tickerModel, "x", map[string]string{"steps": strconv.Itoa(steps), "step_delay_ms": "1"})
		evs := readAll(t, h, r.ID, func() {
			// Stall until the run is far ahead, but not finished.
			for {
				resp, err := s.ResponseGet(testCtx(t), r.ID)
				if err != nil {
					t.Fatal(err)
				}
				if resp.NextSeq > 400 || resp.Status.Terminal() {
					if resp.Status.Terminal() {
						t.Log("the run finished while the reader stalled")
					}
					return
				}
				time.Sleep(time.Millisecond)
			}
		})
		requireLog(t, s, r.ID, evs)
		t.Logf("%s: %d events, %d reader store reads", be.name, len(evs), s.reads.Load())
	})
}

// Wait on a run driven here returns the response as its terminal commit
// wrote it, from memory: one store read (the response, for its owner),
// and the same record the store then holds.
func TestHost_WaitLocalRunFromMemory(t *testing.T) {
	forEachBackend(t, func(t *testing.T, be testDB) {
		s := &opsStore{Store: be.open(t)}
		defer s.Close()
		h := newHost(t, s, nil, registerDemos)
		defer shutdown(t, h)
		r := create(t, h, examples.Silent, "x", map[string]string{"steps": "20", "step_delay_ms": "2"})
		got, err := h.Wait(context.WithValue(testCtx(t), readerKey{}, true), r.ID, "")
		if err != nil {
			t.Fatal(err)
		}
		want, err := s.ResponseGet(testCtx(t), r.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status != want.Status || !bytes.Equal(got.Snapshot, want.Snapshot) || !bytes.Equal(got.Error, want.Error) ||
			!bytes.Equal(got.Usage, want.Usage) || got.NextSeq != want.NextSeq || got.CommitStep != want.CommitStep ||
			!got.Finished() || got.ID != want.ID || got.RunID != want.RunID || !bytes.Equal(got.Request, want.Request) {
			t.Fatalf("Wait returned\n%+v\nthe store holds\n%+v", got, want)
		}
		if n := s.reads.Load(); n != 1 {
			t.Fatalf("Wait made %d store reads for a run driven here, want 1", n)
		}
	})
}

// holdStore holds the commit of step hold before writing it until release
// is closed; with lost, that commit is written but reported failed
// (transient) once, as when the answer is lost.
type holdStore struct {
	store.Store
	hold    int64
	lost    bool
	held    chan int64 // receives the first seq of the held commit's events
	release chan struct{}
	once    atomic.Bool
}

func (s *holdStore) Commit(ctx context.Context, p *store.CommitParams) (*store.CommitResult, error) {
	if p.Step != s.hold || !s.once.CompareAndSwap(false, true) {
		return s.Store.Commit(ctx, p)
	}
	s.held <- p.Events[0].Seq
	<-s.release
	res, err := s.Store.Commit(ctx, p)
	if err == nil && s.lost {
		return nil, fmt.Errorf("answer lost: %w", store.ErrUnavailable)
	}
	return res, err
}

// A reader here gets a superstep's events only after its commit returned
// (never while it is in flight), and once, also when the commit's answer
// was lost and the host found it committed.
func TestHost_EventsPublishedOnlyAfterCommit(t *testing.T) {
	for _, lost := range []bool{false, true} {
		t.Run(fmt.Sprintf("lost=%v", lost), func(t *testing.T) {
			t.Parallel()
			raw := openStore(t, filepath.Join(t.TempDir(), "host.db"))
			defer raw.Close()
			s := &holdStore{Store: raw, hold: 3, lost: lost, held: make(chan int64, 1), release: make(chan struct{})}
			h := newHost(t, s, &host.Config{CommitBackoff: time.Millisecond}, registerTicker)
			defer shutdown(t, h)
			var once sync.Once
			release := func() { once.Do(func() { close(s.release) }) }
			defer release() // before the shutdown, also when the test fails
			r := create(t, h, tickerModel, "x", map[string]string{"steps": "5"})
			ctx := testCtx(t)
			got := make(chan store.Event, 1000)
			errc := make(chan error, 1)
			go func() {
				defer close(got)
				for ev, err := range h.Events(ctx, r.ID, "", -1) {
					if err != nil {
						errc <- err
						return
					}
					got <- ev
				}
			}()
			first := <-s.held
			var evs []store.Event
			deadline := time.After(100 * time.Millisecond) // room for a wrong host to publish early
		early:
			for {
				select {
				case ev := <-got:
					if ev.Seq >= first {
						t.Fatalf("event %d (%s) reached a reader while its commit was in flight", ev.Seq, ev.Type)
					}
					evs = append(evs, ev)
				case <-deadline:
					break early
				}
			}
			release()
			for ev := range got {
				evs = append(evs, ev)
			}
			select {
			case err := <-errc:
				t.Fatal(err)
			default:
			}
			requireLog(t, raw, r.ID, evs)
		})
	}
}

// viewStore is opsStore that also reads responses without their request
// (store.ResponseViewReader), counting those reads.
type viewStore struct {
	*opsStore
	views atomic.Int64
}

func (s *viewStore) ResponseView(ctx context.Context, id string) (*store.Response, error) {
	s.views.Add(1)
	return s.opsStore.Store.(store.ResponseViewReader).ResponseView(ctx, id)
}

// GetView and a reader's owner check use the store's ResponseView: the
// response without its request (here a 200 KB input), not ResponseGet;
// GetView shows what Get does but for Request and Input.
func TestHost_GetViewLeavesRequestUnread(t *testing.T) {
	forEachBackend(t, func(t *testing.T, be testDB) {
		ops := &opsStore{Store: be.open(t)}
		defer ops.Close()
		s := &viewStore{opsStore: ops}
		h := newHost(t, s, nil, registerDemos)
		defer shutdown(t, h)
		r := create(t, h, examples.Echo, strings.Repeat("a long input ", 16<<10), nil)
		final := wait(t, h, r.ID)
		ctx := context.WithValue(testCtx(t), readerKey{}, true)
		gets := ops.gets.Load()
		view, err := h.GetView(ctx, r.ID, "")
		if err != nil {
			t.Fatal(err)
		}
		if view.Request != nil || view.Input != nil || !bytes.Equal(view.Snapshot, final.Snapshot) || view.Status != final.Status {
			t.Fatalf("GetView: request %d bytes, input %d, status %s; want none, none, %s and Get's snapshot",
				len(view.Request), len(view.Input), view.Status, final.Status)
		}
		for _, err := range h.Events(ctx, r.ID, "", -1) {
			if err != nil {
				t.Fatal(err)
			}
		}
		if n := ops.gets.Load() - gets; n != 0 || s.views.Load() < 2 {
			t.Fatalf("GetView and Events: %d ResponseGet, %d ResponseView; want 0 and at least 2", n, s.views.Load())
		}
		full, err := h.Get(ctx, r.ID, "")
		if err != nil || len(full.Request) < 16<<10*len("a long input ") {
			t.Fatalf("Get: %d request bytes, %v", len(full.Request), err)
		}
	})
}
