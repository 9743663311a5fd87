package host_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"iter"
	"math/rand/v2"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/superstep/superstep/agent"
	"github.com/superstep/superstep/host"
	"github.com/superstep/superstep/store"
	"github.com/superstep/superstep/workflow"
)

// text returns n bytes of words drawn by seed: text a model and a user
// would exchange (content-defined cuts need varied bytes).
func text(seed uint64, n int) string {
	words := []string{"the", "run", "keeps", "a", "conversation", "of", "many", "turns", "and", "each", "one", "adds", "text", "to", "it"}
	r := rand.New(rand.NewPCG(seed, 1))
	var b strings.Builder
	for b.Len() < n {
		b.WriteString(words[r.IntN(len(words))])
		b.WriteByte(' ')
	}
	return b.String()[:n]
}

// TestChunkParts: big state and executor parts go to the store as chunks
// and come back whole, in their place; small parts and the header as they
// are.
func TestChunkParts(t *testing.T) {
	big := []byte(text(1, 5*host.ChunkFrom))
	in := []workflow.Part{
		{Name: "header", Data: []byte(text(2, 2*host.ChunkFrom))}, // never cut
		{Name: "state/agent/memory/agent", Data: big},
		{Name: "state/small", Data: []byte("{}")},
		{Name: "executor/x", Data: []byte(text(3, host.ChunkFrom))},
	}
	sp := host.ToStoreParts(in)
	var names []string
	for _, p := range sp {
		names = append(names, p.Name)
	}
	if sp[0].Name != "header" || !slices.Contains(names, "state/small") || slices.Contains(names, "state/agent/memory/agent") ||
		slices.Contains(names, "executor/x") || len(sp) < 6 {
		t.Fatalf("store parts %q", names)
	}
	for _, p := range sp {
		if strings.HasPrefix(p.Name, "chunk/") && !strings.HasSuffix(p.Name, "/state/agent/memory/agent") && !strings.HasSuffix(p.Name, "/executor/x") {
			t.Fatalf("chunk %q of an unexpected part", p.Name)
		}
	}
	back, err := host.ToWorkflowParts(sp)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.EqualFunc(back, in, func(a, b workflow.Part) bool { return a.Name == b.Name && bytes.Equal(a.Data, b.Data) }) {
		t.Fatal("parts read back differ from the parts written")
	}
	// A store need not keep the parts' order: chunks shuffled join the
	// same, the part at its first chunk's place.
	shuffled := slices.Clone(sp)
	rand.New(rand.NewPCG(4, 4)).Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	back, err = host.ToWorkflowParts(shuffled)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]byte{}
	for _, p := range back {
		got[p.Name] = p.Data
	}
	if len(back) != len(in) || !bytes.Equal(got["state/agent/memory/agent"], big) || !bytes.Equal(got["executor/x"], in[3].Data) {
		t.Fatalf("shuffled chunks read back as %d parts", len(back))
	}

	// Damage is an error, never a part read short.
	var chunks []int
	for i, p := range sp {
		if strings.HasSuffix(p.Name, "/state/agent/memory/agent") {
			chunks = append(chunks, i)
		}
	}
	for name, ps := range map[string][]store.Part{
		"missing":   slices.Delete(slices.Clone(sp), chunks[1], chunks[1]+1),
		"repeated":  slices.Insert(slices.Clone(sp), chunks[1], sp[chunks[1]]),
		"malformed": append(slices.Clone(sp), store.Part{Name: "chunk/x/2/state/y", Data: []byte("a")}),
		"count":     append(slices.Clone(sp), store.Part{Name: "chunk/1/2/state/agent/memory/agent", Data: []byte("a")}),
		"index":     append(slices.Clone(sp), store.Part{Name: "chunk/2/2/state/y", Data: []byte("a")}),
		"zeros":     append(slices.Clone(sp), store.Part{Name: "chunk/00/2/state/y", Data: []byte("a")}),
		"huge":      append(slices.Clone(sp), store.Part{Name: "chunk/0/999999999999/state/y", Data: []byte("a")}),
	} {
		if _, err := host.ToWorkflowParts(ps); err == nil {
			t.Errorf("%s chunk: read back without an error", name)
		}
	}
}

// TestChunkParts_GrowingShares: a part that grew at its end shares all but
// its last chunks with the part before.
func TestChunkParts_GrowingShares(t *testing.T) {
	before := []byte(text(5, 8*host.ChunkFrom))
	after := append(slices.Clip(before), text(6, 3000)...)
	hashes := func(data []byte) map[[32]byte]int {
		m := map[[32]byte]int{}
		for _, p := range host.ToStoreParts([]workflow.Part{{Name: "state/m", Data: data}}) {
			m[sha256.Sum256(p.Data)] = len(p.Data)
		}
		return m
	}
	old := hashes(before)
	added := 0
	for h, n := range hashes(after) {
		if _, ok := old[h]; !ok {
			added += n
		}
	}
	if added > 3000+2*64<<10 || added == len(after) {
		t.Fatalf("a part grown by 3,000 bytes stores %d new bytes of its %d", added, len(after))
	}
}

// digestAgent answers each turn with the number of messages it was
// given and a digest of their texts, so a test can check it saw the whole
// conversation.
var digestAgent = agent.AgentFunc(func(ctx context.Context, s *agent.Session, in []agent.Message) iter.Seq2[agent.Update, error] {
	return func(yield func(agent.Update, error) bool) {
		h := sha256.New()
		for _, m := range in {
			fmt.Fprintf(h, "%s:%s\n", m.Role, m.Text)
		}
		yield(agent.Update{Kind: agent.UpdateText, Text: fmt.Sprintf("%d %x %s", len(in), h.Sum(nil)[:8], text(uint64(len(in)), 400))}, nil)
	}
})

// TestHost_LongConversationStoredLinearly: a hosted agent keeps its
// conversation in one state part, and a run keeps the checkpoint of every
// finished turn. Each turn must store what it added (and a chunk or two),
// not the whole history again: the bytes the kept checkpoints hold, each
// distinct part counted once (as a store keeps a run's blobs), grow by
// about a turn per turn. Every turn restores the state from the store, so
// the agent's digest checks that the joined history is whole.
func TestHost_LongConversationStoredLinearly(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, db testDB) {
		raw := db.open(t)
		h := newHost(t, raw, nil, func(t *testing.T, h *host.Host) {
			if err := h.RegisterAgent("chat", digestAgent); err != nil {
				t.Fatal(err)
			}
		})
		t.Cleanup(func() {
			shutdown(t, h)
			if err := store.Check(context.Background(), raw); err != nil {
				t.Errorf("store.Check: %v", err)
			}
			if err := raw.Close(); err != nil {
				t.Errorf("close store: %v", err)
			}
		})
		ctx := testCtx(t)
		const turns, userBytes = 60, 2000
		var prev *store.Response
		var conv []string // role:text of every message so far
		stored := func() int {
			seen := map[[32]byte]bool{}
			total := 0
			infos, err := raw.CheckpointList(ctx, prev.RunID)
			if err != nil {
				t.Fatal(err)
			}
			for _, ci := range infos {
				cp, err := raw.CheckpointGet(ctx, prev.RunID, ci.Step)
				if err != nil {
					t.Fatal(err)
				}
				for _, p := range cp.Parts {
					if h := sha256.Sum256(p.Data); !seen[h] {
						seen[h] = true
						total += len(p.Data)
					}
				}
			}
			return total
		}
		var at40, history int
		for i := range turns {
			in := text(uint64(100+i), userBytes)
			p := &host.CreateParams{Model: "chat", Store: true, Input: []host.InputItem{{Type: host.InputMessage, Role: "user", Text: in}}}
			if prev != nil {
				p.PreviousResponseID = prev.ID
			}
			r, err := h.Create(ctx, p)
			if err != nil {
				t.Fatalf("turn %d: %v", i, err)
			}
			done := wait(t, h, r.ID)
			if done.Status != store.StatusCompleted {
				t.Fatalf("turn %d: %s", i, done.Status)
			}
			conv = append(conv, "user:"+in)
			digest := sha256.New()
			for _, m := range conv {
				fmt.Fprintln(digest, m)
			}
			out := outputs(collect(t, h, r.ID, -1))
			want := fmt.Sprintf("%d %x ", len(conv), digest.Sum(nil)[:8])
			if len(out) != 1 || !strings.HasPrefix(out[0], want) {
				t.Fatalf("turn %d: the agent answered %.40q, want %q: it did not see the whole conversation", i, out, want)
			}
			conv = append(conv, "assistant:"+out[0])
			history += len(in) + len(out[0])
			prev = r
			if i == 39 {
				at40 = stored()
			}
		}
		last20 := stored() - at40
		// The run's checkpoints as the API shows them: parts, not chunks.
		views, err := h.RunCheckpoints(ctx, prev.RunID, "", false)
		if err != nil {
			t.Fatal(err)
		}
		lastView := views[len(views)-1]
		var memory *host.CheckpointPart
		for i, p := range lastView.Parts {
			if strings.HasPrefix(p.Name, "chunk/") {
				t.Fatalf("RunCheckpoints shows the chunk %q", p.Name)
			}
			if p.Name == "state/agent/memory/agent" {
				memory = &lastView.Parts[i]
			}
		}
		if memory == nil || memory.Size < int64(history) || !memory.Changed {
			t.Fatalf("RunCheckpoints' last checkpoint: memory part %+v, want one of the whole history (> %d bytes), changed", memory, history)
		}
		t.Logf("%s: %d turns, %d bytes of text; checkpoints hold %d distinct bytes, %d added by the last 20 turns",
			db.name, turns, history, at40+last20, last20)
		// Without chunks each of the last 20 turns stored the whole history
		// again (100-150 KB); with them, its ~2.4 KB and a chunk or two.
		if perTurn := last20 / 20; perTurn > 24<<10 {
			t.Fatalf("each of the last 20 turns stored %d bytes (the history is %d): the state is not shared between turns", perTurn, history)
		}
	})
}

// TestHost_LongConversation_RecoversChunkedState: a host dies before the
// commit of a turn whose conversation is stored in chunks; the next host
// restores the run from its last checkpoint (chunks joined), runs the turn
// again, and the agent sees the whole conversation then and in the turn
// after.
func TestHost_LongConversation_RecoversChunkedState(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, db testDB) {
		register := func(t *testing.T, h *host.Host) {
			if err := h.RegisterAgent("chat", digestAgent); err != nil {
				t.Fatal(err)
			}
		}
		var armed atomic.Bool
		inc := startIncarnation(t, db, host.Config{}, register, func(f *host.Fault) bool {
			return armed.Load() && f.Point == host.FaultCommitBefore
		})
		ctx := testCtx(t)
		var conv []string
		var prev string
		turn := func(h *host.Host, i int) *store.Response {
			t.Helper()
			in := text(uint64(500+i), 2000)
			r, err := h.Create(ctx, &host.CreateParams{Model: "chat", Store: true, PreviousResponseID: prev,
				Input: []host.InputItem{{Type: host.InputMessage, Role: "user", Text: in}}})
			if err != nil {
				t.Fatalf("turn %d: %v", i, err)
			}
			conv = append(conv, "user:"+in)
			prev = r.ID
			return r
		}
		check := func(h *host.Host, r *store.Response, i int) {
			t.Helper()
			if done := wait(t, h, r.ID); done.Status != store.StatusCompleted {
				t.Fatalf("turn %d: %s", i, done.Status)
			}
			digest := sha256.New()
			for _, m := range conv {
				fmt.Fprintln(digest, m)
			}
			out := outputs(collect(t, h, r.ID, -1))
			if want := fmt.Sprintf("%d %x ", len(conv), digest.Sum(nil)[:8]); len(out) != 1 || !strings.HasPrefix(out[0], want) {
				t.Fatalf("turn %d: the agent answered %.40q, want %q", i, out, want)
			}
			conv = append(conv, "assistant:"+out[0])
		}
		const before = 20 // ~50 KB of conversation: past host.ChunkFrom
		for i := range before {
			check(inc.h, turn(inc.h, i), i)
		}
		last, err := inc.raw.CheckpointGetLast(ctx, mustRun(t, inc.h, prev))
		if err != nil {
			t.Fatal(err)
		}
		chunks := 0
		for _, p := range last.Parts {
			if strings.HasPrefix(p.Name, "chunk/") {
				chunks++
			}
		}
		if chunks < 2 {
			t.Fatalf("the conversation's checkpoint holds %d chunks: the test does not reach chunked state", chunks)
		}
		armed.Store(true)
		r := turn(inc.h, before)
		inc.crashed()

		inc2 := startIncarnation(t, db, host.Config{}, register, nil)
		check(inc2.h, r, before)
		check(inc2.h, turn(inc2.h, before+1), before+1)
	})
}

// mustRun returns the run of response id.
func mustRun(t *testing.T, h *host.Host, id string) string {
	t.Helper()
	r, err := h.Get(testCtx(t), id, "")
	if err != nil {
		t.Fatal(err)
	}
	return r.RunID
}

// FuzzToWorkflowParts: store parts of any names and bytes are joined or
// refused, never a panic; what toStoreParts wrote always reads back.
func FuzzToWorkflowParts(f *testing.F) {
	f.Add("chunk/0/2/state/x", []byte("ab"), "chunk/1/2/state/x", []byte("cd"), 40000)
	f.Add("chunk/0/1/executor/e", []byte{}, "header", []byte("{}"), 0)
	f.Add("chunk/1/1/state/x", []byte("a"), "chunk/-1/2/", []byte("b"), 70000)
	f.Fuzz(func(t *testing.T, n1 string, d1 []byte, n2 string, d2 []byte, size int) {
		parts, err := host.ToWorkflowParts([]store.Part{{Name: n1, Data: d1}, {Name: n2, Data: d2}})
		if err == nil {
			total := 0
			for _, p := range parts {
				total += len(p.Data)
			}
			if total != len(d1)+len(d2) && !(n1 == n2 && !strings.HasPrefix(n1, "chunk/")) {
				t.Fatalf("joined %d bytes of %d", total, len(d1)+len(d2))
			}
		}
		size = min(max(size, 0), 1<<20)
		data := bytes.Repeat(append(slices.Clip(d1), d2...), 1+size/(1+len(d1)+len(d2)))
		in := []workflow.Part{{Name: "state/" + n1, Data: data}, {Name: "header", Data: d2}}
		back, err := host.ToWorkflowParts(host.ToStoreParts(in))
		if err != nil || len(back) != 2 || back[0].Name != in[0].Name || !bytes.Equal(back[0].Data, data) || !bytes.Equal(back[1].Data, d2) {
			t.Fatalf("round trip of a %d-byte part: %v", len(data), err)
		}
	})
}
