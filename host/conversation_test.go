package host_test

import (
	"context"
	"encoding/json"
	"errors"
	"iter"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/superstep/superstep/agent"
	"github.com/superstep/superstep/examples"
	"github.com/superstep/superstep/host"
	"github.com/superstep/superstep/store"
)

// convTexts lists a conversation's items as role:text (messages) or type.
func convTexts(t *testing.T, h *host.Host, id, owner string) []string {
	t.Helper()
	items, more, err := h.ConversationItems(testCtx(t), id, owner, &host.ConversationItemsParams{Limit: 100})
	if err != nil || more {
		t.Fatalf("ConversationItems: %v (more %v)", err, more)
	}
	var out []string
	for _, it := range items {
		var v struct {
			ID      string `json:"id"`
			Type    string `json:"type"`
			Role    string `json:"role"`
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
		}
		if err := json.Unmarshal(it.JSON, &v); err != nil || v.ID != it.ID {
			t.Fatalf("item %s: %s (%v)", it.ID, it.JSON, err)
		}
		if v.Type != "message" {
			out = append(out, v.Type)
			continue
		}
		out = append(out, v.Role+":"+v.Content[0].Text)
	}
	return out
}

func turn(t *testing.T, h *host.Host, conv, owner, text string) *store.Response {
	t.Helper()
	r, err := h.Create(testCtx(t), &host.CreateParams{Model: "chat", Owner: owner, Conversation: conv, Store: true,
		Input: []host.InputItem{{Type: host.InputMessage, Role: "user", Text: text}}})
	if err != nil {
		t.Fatalf("turn %q: %v", text, err)
	}
	return r
}

func TestHost_ConversationTurns(t *testing.T) {
	t.Parallel()
	b := setup(t, &setupOpts{noReg: true})
	if err := b.host.RegisterAgent("chat", historyAgent); err != nil {
		t.Fatal(err)
	}
	c, first, err := b.host.ConversationCreate(testCtx(t), "", map[string]string{"topic": "t"},
		[]host.InputItem{{Type: host.InputMessage, Role: "system", Text: "be brief"}})
	if err != nil || len(first) != 1 || c.Metadata["topic"] != "t" {
		t.Fatalf("ConversationCreate: %+v %v %v", c, first, err)
	}
	r1 := turn(t, b.host, c.ID, "", "hi")
	if got := wait(t, b.host, r1.ID); got.Status != store.StatusCompleted {
		t.Fatalf("turn 1: %s", got.Status)
	}
	var snap struct {
		Conversation *struct{ ID string } `json:"conversation"`
	}
	if err := json.Unmarshal(wait(t, b.host, r1.ID).Snapshot, &snap); err != nil || snap.Conversation == nil || snap.Conversation.ID != c.ID {
		t.Fatalf("turn 1's Response shows conversation %+v (%v)", snap.Conversation, err)
	}
	want := []string{"system:be brief", "user:hi", "assistant:system:be brief|user:hi", "assistant:bye"}
	if got := convTexts(t, b.host, c.ID, ""); !slices.Equal(got, want) {
		t.Fatalf("after turn 1: %q, want %q", got, want)
	}
	r2 := turn(t, b.host, c.ID, "", "again")
	wait(t, b.host, r2.ID)
	got := convTexts(t, b.host, c.ID, "")
	if len(got) != 7 || got[5] != "assistant:system:be brief|user:hi|assistant:system:be brief|user:hi|assistant:bye|user:again" {
		t.Fatalf("after turn 2: %q", got)
	}
	// Delete turn 1's first answer: turn 3 sees the history without it.
	items, _, err := b.host.ConversationItems(testCtx(t), c.ID, "", &host.ConversationItemsParams{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.host.ConversationItemDelete(testCtx(t), c.ID, "", items[2].ID); err != nil {
		t.Fatal(err)
	}
	r3 := turn(t, b.host, c.ID, "", "third")
	evs := collect(t, b.host, r3.ID, -1)
	wantOut := "system:be brief|user:hi|assistant:bye|user:again|assistant:" + got[5][len("assistant:"):] + "|assistant:bye|user:third"
	if out := outputs(evs); len(out) != 2 || out[0] != wantOut {
		t.Fatalf("turn 3 saw %q, want %q", out, wantOut)
	}

	// Another owner sees no such conversation, and cannot take a turn.
	_, err = b.host.ConversationGet(testCtx(t), c.ID, "bob")
	requireNotFound(t, err, "")
	_, err = b.host.Create(testCtx(t), &host.CreateParams{Model: "chat", Owner: "bob", Conversation: c.ID,
		Input: []host.InputItem{{Type: host.InputMessage, Role: "user", Text: "x"}}})
	requireNotFound(t, err, "conversation")
	_, err = b.host.Create(testCtx(t), &host.CreateParams{Model: "chat", Owner: "", Conversation: c.ID, PreviousResponseID: r3.ID,
		Input: []host.InputItem{{Type: host.InputMessage, Role: "user", Text: "x"}}})
	if ie, ok := errors.AsType[*host.InputError](err); !ok || ie.Param != "previous_response_id" {
		t.Fatalf("conversation with previous_response_id: %v", err)
	}
	if n := len(convTexts(t, b.host, c.ID, "")); n != 9 {
		t.Fatalf("%d items after refused turns, want 9", n)
	}
}

func requireNotFound(t *testing.T, err error, param string) {
	t.Helper()
	nf, ok := errors.AsType[*host.NotFoundError](err)
	if !ok || nf.Param != param || !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("err = %v, want a *host.NotFoundError with param %q", err, param)
	}
}

// gateAgent answers "got <text>" once its gate is opened; its first turn
// closes started when it begins.
type gateAgent struct {
	started chan struct{}
	gate    chan struct{}
	calls   int
}

func (a *gateAgent) Run(ctx context.Context, _ *agent.Session, in []agent.Message) iter.Seq2[agent.Update, error] {
	return func(yield func(agent.Update, error) bool) {
		a.calls++
		if a.calls == 1 {
			close(a.started)
		}
		select {
		case <-a.gate:
		case <-ctx.Done():
			yield(agent.Update{}, ctx.Err())
			return
		}
		yield(agent.Update{Kind: agent.UpdateText, Text: "got " + in[len(in)-1].Text}, nil)
	}
}

// One turn at a time: a second turn while the first runs is refused with
// OpenAI's conversation_locked and stores nothing; a cancelled turn
// appends nothing and frees the conversation.
func TestHost_ConversationOneTurnAtATime(t *testing.T) {
	t.Parallel()
	b := setup(t, &setupOpts{noReg: true})
	a := &gateAgent{started: make(chan struct{}), gate: make(chan struct{})}
	if err := b.host.RegisterAgent("chat", a); err != nil {
		t.Fatal(err)
	}
	c, _, err := b.host.ConversationCreate(testCtx(t), "", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	r1, err := b.host.Create(testCtx(t), &host.CreateParams{Model: "chat", Conversation: c.ID, Background: true, Store: true,
		Input: []host.InputItem{{Type: host.InputMessage, Role: "user", Text: "one"}}})
	if err != nil {
		t.Fatal(err)
	}
	<-a.started
	_, err = b.host.Create(testCtx(t), &host.CreateParams{Model: "chat", Conversation: c.ID,
		Input: []host.InputItem{{Type: host.InputMessage, Role: "user", Text: "two"}}})
	if ie, ok := errors.AsType[*host.InputError](err); !ok || ie.Code != "conversation_locked" || ie.Param != "conversation" {
		t.Fatalf("second turn: %v", err)
	}
	if _, err := b.host.Cancel(testCtx(t), r1.ID, ""); err != nil {
		t.Fatal(err)
	}
	if got := wait(t, b.host, r1.ID); got.Status != store.StatusCancelled {
		t.Fatalf("turn 1: %s", got.Status)
	}
	if got := convTexts(t, b.host, c.ID, ""); len(got) != 0 {
		t.Fatalf("items after a cancelled turn: %q", got)
	}
	close(a.gate)
	r2 := turn(t, b.host, c.ID, "", "three")
	wait(t, b.host, r2.ID)
	if got := convTexts(t, b.host, c.ID, ""); !slices.Equal(got, []string{"user:three", "assistant:got three"}) {
		t.Fatalf("items after turn 2: %q", got)
	}
}

// A turn interrupted by a host stop is finished by recovery on another
// host, whose terminal commit appends the turn's items.
func TestHost_ConversationTurnRecovered(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "h.db")
	s1 := openStore(t, path)
	a := &blockingAgent{started: make(chan struct{})}
	reg := func(t *testing.T, h *host.Host) {
		if err := h.RegisterAgent("chat", a); err != nil {
			t.Fatal(err)
		}
	}
	h1 := newHost(t, s1, &host.Config{HostID: "h1"}, reg)
	c, _, err := h1.ConversationCreate(testCtx(t), "", nil, []host.InputItem{{Type: host.InputMessage, Role: "user", Text: "earlier"}})
	if err != nil {
		t.Fatal(err)
	}
	r, err := h1.Create(testCtx(t), &host.CreateParams{Model: "chat", Conversation: c.ID, Background: true, Store: true,
		Input: []host.InputItem{{Type: host.InputMessage, Role: "user", Text: "now"}}})
	if err != nil {
		t.Fatal(err)
	}
	<-a.started
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_ = h1.Shutdown(ctx)
	shutdownOnce.Store(h1, true)
	if err := s1.Close(); err != nil {
		t.Fatal(err)
	}
	s2 := openStore(t, path)
	defer s2.Close()
	h2 := newHost(t, s2, &host.Config{HostID: "h2"}, reg)
	defer shutdown(t, h2)
	if got := wait(t, h2, r.ID); got.Status != store.StatusCompleted {
		t.Fatalf("recovered turn: %s", got.Status)
	}
	if got := convTexts(t, h2, c.ID, ""); !slices.Equal(got, []string{"user:earlier", "user:now", "assistant:got now"}) {
		t.Fatalf("items after the recovered turn: %q", got)
	}
}

// A workflow model's turn runs the workflow again with the conversation's
// items and the input as its input messages (as stateless replay of them
// would), and appends like an agent's.
func TestHost_ConversationWorkflowTurns(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	c, _, err := b.host.ConversationCreate(testCtx(t), "", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	var runs []string
	for _, text := range []string{"one", "two"} {
		r, err := b.host.Create(testCtx(t), &host.CreateParams{Model: examples.Echo, Conversation: c.ID, Store: true,
			Input: []host.InputItem{{Type: host.InputMessage, Role: "user", Text: text}}})
		if err != nil {
			t.Fatal(err)
		}
		if got := wait(t, b.host, r.ID); got.Status != store.StatusCompleted {
			t.Fatalf("turn %q: %s", text, got.Status)
		}
		runs = append(runs, r.RunID)
	}
	got := convTexts(t, b.host, c.ID, "")
	if len(got) != 4 || got[0] != "user:one" || got[2] != "user:two" || !strings.HasPrefix(got[1], "assistant:") {
		t.Fatalf("items %q", got)
	}
	if runs[0] == runs[1] {
		t.Fatalf("both turns ran on run %s; each turn is a new run", runs[0])
	}
}

// A conversation whose items answer no call (added through the API as they
// came) cannot be replayed: a turn is a 400 naming the conversation, and
// stores nothing, until the item is deleted.
func TestHost_ConversationStrayOutput(t *testing.T) {
	t.Parallel()
	b := setup(t, &setupOpts{noReg: true})
	if err := b.host.RegisterAgent("chat", historyAgent); err != nil {
		t.Fatal(err)
	}
	c, items, err := b.host.ConversationCreate(testCtx(t), "", nil,
		[]host.InputItem{{Type: host.InputFunctionCallOutput, CallID: "call_x", Output: "42"}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = b.host.Create(testCtx(t), &host.CreateParams{Model: "chat", Conversation: c.ID,
		Input: []host.InputItem{{Type: host.InputMessage, Role: "user", Text: "hi"}}})
	if ie, ok := errors.AsType[*host.InputError](err); !ok || ie.Param != "conversation" {
		t.Fatalf("turn on a stray output: %v", err)
	}
	if runs, _ := b.store.RunList(testCtx(t), &store.RunListParams{}); len(runs) != 0 {
		t.Fatalf("a refused turn stored %d runs", len(runs))
	}
	if _, err := b.host.ConversationItemDelete(testCtx(t), c.ID, "", items[0].ID); err != nil {
		t.Fatal(err)
	}
	r := turn(t, b.host, c.ID, "", "hi")
	if got := wait(t, b.host, r.ID); got.Status != store.StatusCompleted {
		t.Fatalf("turn after the delete: %s", got.Status)
	}
}
