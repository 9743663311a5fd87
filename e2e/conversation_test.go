package e2e

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"github.com/superstep/superstep/agent"
	"github.com/superstep/superstep/localmodel"
)

// newChatEnv is a server hosting "chat.local", a plain ChatAgent on the
// in-process local model server: a conversation model.
func newChatEnv(t *testing.T) *env {
	t.Helper()
	ms, err := localmodel.Start("127.0.0.1:0", &localmodel.Options{TokenDelay: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := ms.Close(ctx); err != nil {
			t.Errorf("local model server: %v", err)
		}
	})
	modelHTTP := &http.Client{Transport: &http.Transport{}}
	t.Cleanup(modelHTTP.CloseIdleConnections)
	chat, err := agent.NewChatAgent(&agent.Options{Name: "chat", BaseURL: ms.URL, APIKey: "local", Model: "local", HTTPClient: modelHTTP})
	if err != nil {
		t.Fatal(err)
	}
	logger := testLogger()
	st, h := newHost(t, "chat.db", logger)
	if err := h.RegisterAgent("chat.local", chat); err != nil {
		t.Fatal(err)
	}
	return serveHost(t, context.Background(), st, h, logger)
}

// A conversation through openai-go: previous_response_id continues the
// latest response on its run, and an earlier one branches (a new run from
// its state; the original is unchanged); a client that keeps the
// conversation itself resends it whole, function_call and its output
// included, and the model gets them paired (the local model answers a
// tool result with "Tool <name> returned: <output>").
func TestConversation_OpenAIGo(t *testing.T) {
	t.Parallel()
	e := newChatEnv(t)
	ctx := context.Background()
	turn := func(prev, text string) *responses.Response {
		t.Helper()
		p := responses.ResponseNewParams{Model: "chat.local", Input: textInput(text)}
		if prev != "" {
			p.PreviousResponseID = openai.String(prev)
		}
		r, err := e.client.Responses.New(ctx, p)
		if err != nil {
			t.Fatalf("turn %q: %v", text, err)
		}
		if r.Status != "completed" || r.OutputText() == "" {
			t.Fatalf("turn %q: %s %s", text, r.Status, r.RawJSON())
		}
		return r
	}
	first := turn("", "hello")
	second := turn(first.ID, "second")
	if second.PreviousResponseID != first.ID {
		t.Fatalf("second's previous_response_id %q", second.PreviousResponseID)
	}
	branch := turn(first.ID, "branch")
	if branch.PreviousResponseID != first.ID {
		t.Fatalf("branch's previous_response_id %q", branch.PreviousResponseID)
	}
	rec2, err := e.store.ResponseGet(ctx, second.ID)
	if err != nil {
		t.Fatal(err)
	}
	recB, err := e.store.ResponseGet(ctx, branch.ID)
	if err != nil {
		t.Fatal(err)
	}
	if recB.RunID == rec2.RunID {
		t.Fatal("the branch ran on the conversation's run")
	}
	third := turn(second.ID, "third") // the original conversation goes on
	if rec3, err := e.store.ResponseGet(ctx, third.ID); err != nil || rec3.RunID != rec2.RunID {
		t.Fatalf("third turn on run %v (%v), want %s", rec3, err, rec2.RunID)
	}

	// Stateless replay: the whole conversation, the call and its output.
	call := responses.ResponseInputItemParamOfFunctionCall(`{"q":"x"}`, "call_1", "lookup")
	out := responses.ResponseInputItemParamOfFunctionCallOutput("found x")
	out.OfFunctionCallOutput.CallID = openai.String("call_1")
	r, err := e.client.Responses.New(ctx, responses.ResponseNewParams{Model: "chat.local",
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
			responses.ResponseInputItemParamOfMessage("please lookup x", responses.EasyInputMessageRoleUser), call, out}}})
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != "completed" || r.OutputText() != "Tool lookup returned: found x" {
		t.Fatalf("replayed conversation: %s %q", r.Status, r.OutputText())
	}

	// An image reaches the model as an image part (the local model reads
	// it as "[image]").
	img := responses.ResponseInputContentParamOfInputImage(responses.ResponseInputImageDetailLow)
	img.OfInputImage.ImageURL = openai.String("data:image/png;base64,iVBORw0KGgo=")
	r, err = e.client.Responses.New(ctx, responses.ResponseNewParams{Model: "chat.local",
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
			responses.ResponseInputItemParamOfMessage(responses.ResponseInputMessageContentListParam{
				responses.ResponseInputContentParamOfInputText("what is this?"), img}, responses.EasyInputMessageRoleUser)}}})
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != "completed" || !strings.Contains(r.OutputText(), "what is this?[image]") {
		t.Fatalf("image message: %s %q", r.Status, r.OutputText())
	}

	// An output that answers no call in the input is a 400, storing nothing.
	before := settledDump(t, e.store)
	_, err = e.client.Responses.New(ctx, responses.ResponseNewParams{Model: "chat.local",
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{out}}})
	requireStatus(t, err, http.StatusBadRequest)
	requireSameDump(t, before, dumpStore(t, e.store), "a stray function_call_output")
}
