package crash

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/conversations"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/responses"

	"github.com/superstep/superstep/internal/testkit/pgtest"
	"github.com/superstep/superstep/internal/testkit/proctest"
	"github.com/superstep/superstep/internal/testkit/resumeclient"
	"github.com/superstep/superstep/internal/testkit/verifytest"
	"github.com/superstep/superstep/store"
	"github.com/superstep/superstep/store/postgres"
	"github.com/superstep/superstep/store/sqlite"
	"github.com/superstep/superstep/verify"
)

// TestCrash_ConversationParam_* are TestCrash_Conversation_* with the
// turns naming a conversation of the Conversations API (the conversation
// parameter) instead of previous_response_id: each turn reads the
// conversation's items as its history and its terminal commit appends its
// input and output items. The same script (text turns, client tool calls,
// answers by function_call_output, streamed, blocking and background
// turns, Idempotency-Key retries) runs once without kills and once with
// the server SIGKILLed at seeded random points of the turns. At the end
// each turn ended as the reference's did (the local model's input_tokens
// count the words of the whole history it got, so an item lost or doubled
// in a later turn's history changes them), each turn's key gave one
// response, and the conversation's items, listed through the API, are
// exactly the reference conversation's (ids aside): no item lost or
// doubled, in order.
func TestCrash_ConversationParam_SQLite(t *testing.T) {
	t.Parallel()
	db := filepath.Join(proctest.WorkDir(t, *flagKeep, "superstep-crash"), "superstep.db")
	runConversationParam(t, &backend{
		dbArg: db,
		open:  func(ctx context.Context) (store.Store, error) { return sqlite.Open(ctx, db, nil) },
	})
}

func TestCrash_ConversationParam_Postgres(t *testing.T) {
	t.Parallel()
	db := pgtest.Database(t, "superstep_crash")
	runConversationParam(t, &backend{
		dbArg:     db,
		open:      func(ctx context.Context) (store.Store, error) { return postgres.Open(ctx, db, nil) },
		extraArgs: postgresServeArgs,
	})
}

// convParamTurns is the script's length: shorter than the
// previous_response_id variant's, as the two together must stay quick.
func convParamTurns() int { return max(16, *flagKills/4) }

// inConversation returns p naming conversation conv instead of a previous
// response.
func inConversation(p responses.ResponseNewParams, conv string) responses.ResponseNewParams {
	p.PreviousResponseID = param.Opt[string]{}
	p.Conversation = responses.ResponseNewParamsConversationUnion{OfString: openai.String(conv)}
	return p
}

func runConversationParam(t *testing.T, b *backend) {
	seed := *flagSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	n := convParamTurns()
	t.Logf("seed %d, %d turns (replay: go test ./e2e/crash -run '^%s$' -seed %d -kills %d)", seed, n, t.Name(), seed, *flagKills)
	dir := proctest.WorkDir(t, *flagKeep, "superstep-crash")
	args := append(append([]string(nil), b.extraArgs...), "--model-server", "local", "--proxy-models", "all")
	cl := newCluster(binary, b.dbArg, dir, args...)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second+time.Duration(n)*5*time.Second)
	defer cancel()
	t.Cleanup(cl.killAtCleanup)
	if err := cl.start(ctx); err != nil {
		t.Fatal(err)
	}
	ref := &convRun{t: t, cl: cl, name: "ref", n: n, rng: rand.New(rand.NewPCG(seed, 1))}
	ref.conv = newConversation(ctx, t, ref)
	ref.run(ctx)
	checkScript(t, ref)
	ch := &convRun{t: t, cl: cl, name: fmt.Sprintf("chaos-%d", seed), n: n, rng: rand.New(rand.NewPCG(seed, 0xc0de)), kill: true}
	ch.conv = newConversation(ctx, t, ch)
	began := time.Now()
	ch.run(ctx)
	t.Logf("%d kills in %v:\n  %s", len(ch.kills), time.Since(began).Round(time.Millisecond), strings.Join(ch.kills, "\n  "))
	t.Logf("cut streams: %d resumed with starting_after, %d sent again with their key", ch.resumes, ch.reposts)
	if len(ch.kills) < n/5 {
		t.Errorf("seed %d: only %d kills landed in %d turns: the test did not test recovery", seed, len(ch.kills), n)
	}
	var items [2][]string
	for k, cr := range []*convRun{ref, ch} {
		cr.resendAll(ctx)
		checkKeys(t, cr)
		checkServed(ctx, t, cr)
		items[k] = conversationItems(ctx, t, cr)
	}
	checkSameAnswers(t, seed, ref, ch)
	// Each turn appended its input and its output: 2 items a turn.
	if len(items[0]) != 2*n {
		t.Errorf("the reference conversation has %d items after %d turns, want %d:\n  %s", len(items[0]), n, 2*n, strings.Join(items[0], "\n  "))
	}
	if !slices.Equal(items[0], items[1]) {
		t.Errorf("seed %d: the conversation with kills holds\n  %s\nthe crash-free one\n  %s", seed,
			strings.Join(items[1], "\n  "), strings.Join(items[0], "\n  "))
	}
	if err := cl.stop(30 * time.Second); err != nil {
		t.Error(err)
	}
	checkTurnDatabase(ctx, t, b, seed, ref, ch)
	verifytest.CheckCommand(ctx, t, binary, b.dbArg)
}

// newConversation creates cr's conversation on the server up now.
func newConversation(ctx context.Context, t *testing.T, cr *convRun) string {
	cl := cr.client(ctx)
	c, err := cl.Conversations.New(ctx, conversations.ConversationNewParams{})
	if err != nil {
		t.Fatalf("%s: create the conversation: %v", cr.name, err)
	}
	return c.ID
}

// conversationItems lists cr's conversation's items through the API,
// oldest first, each as its JSON without its id (ids are made per run).
func conversationItems(ctx context.Context, t *testing.T, cr *convRun) []string {
	var out []string
	cl := cr.client(ctx)
	pager := cl.Conversations.Items.ListAutoPaging(ctx, cr.conv, conversations.ItemListParams{
		Order: conversations.ItemListParamsOrderAsc, Limit: openai.Int(100)})
	for pager.Next() {
		var m map[string]any
		if err := json.Unmarshal([]byte(pager.Current().RawJSON()), &m); err != nil {
			t.Fatal(err)
		}
		delete(m, "id")
		b, _ := json.Marshal(m) // sorted keys
		out = append(out, string(b))
	}
	if err := pager.Err(); err != nil {
		t.Fatalf("%s: list the conversation's items: %v", cr.name, err)
	}
	return out
}

// checkTurnDatabase reads the database the server left: exactly the two
// conversations' turns, one response each, with logs every client's stream
// and the reference outcomes agree with (package verify), and store.Check
// passing.
func checkTurnDatabase(ctx context.Context, t *testing.T, b *backend, seed uint64, ref, ch *convRun) {
	s, err := b.open(ctx)
	if err != nil {
		t.Fatalf("open the database: %v", err)
	}
	defer s.Close()
	stored := map[string]*store.Response{}
	err = verifytest.ForEachResponse(ctx, s, func(_ *store.Run, r *store.Response) error {
		stored[r.ID] = r
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, cr := range []*convRun{ref, ch} {
		for i, res := range cr.results {
			r := stored[res.ID]
			if r == nil {
				t.Errorf("%s: turn %d's response %s is not in the database", cr.name, i, res.ID)
				continue
			}
			delete(stored, res.ID)
			if w := verifytest.WorkloadOf(r.Request); w != fmt.Sprintf("conv-turn-%02d", i) {
				t.Errorf("%s: turn %d (%s) stored with the request of %q", cr.name, i, r.ID, w)
			}
		}
	}
	for id, r := range stored {
		t.Errorf("seed %d: response %s (%s) belongs to no turn: a doubled turn", seed, id, verifytest.WorkloadOf(r.Request))
	}
	refs := map[string]verify.Outcome{}
	for i, r := range ref.results {
		refs[fmt.Sprintf("conv-turn-%02d", i)] = r.Outcome
	}
	in := &verify.Input{}
	verifytest.AddResponses(ctx, t, s, in, resumeclient.ViewsByID(append(ref.streams, ch.streams...)...), refs, nil)
	rep := verify.Check(in)
	t.Logf("%v", rep)
	if err := rep.Err(); err != nil {
		t.Errorf("seed %d: %v", seed, err)
	}
}
