package examples

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"reflect"
	"strconv"
	"strings"

	"github.com/superstep/superstep/agent"
	"github.com/superstep/superstep/workflow"
)

// Model names of the LLM demo workflows (see RegisterLLM).
const (
	WriterReviewer = "demo.writer-reviewer"
	Tools          = "demo.tools"
)

// Executor ids of the LLM demos: the agents' names too, and the prefixes of
// their per-agent metadata (e.g. "reviewer.reply").
const (
	WriterID    = "writer"
	ReviewerID  = "reviewer"
	AssistantID = "assistant"
)

// CalculateTool is the name of demo.tools' calculator tool.
const CalculateTool = "calculate"

// ReviewPrompt prefixes the writer's draft in the reviewer's input.
const ReviewPrompt = "Draft to review:\n\n"

// ModelMetadataKeys are the request metadata keys the LLM demos pass on to
// the model server with every model request (the knobs of the local model
// server, see package localmodel). "<agent>.<key>" (e.g. "writer.reply")
// sets a key for that agent only and wins over the plain key. Other
// metadata, and these keys when the request does not set them, is not sent,
// so a real model server sees no metadata from an ordinary request.
var ModelMetadataKeys = []string{"reply", "token_delay_ms", "finish_reason", "tool_call", "tool_arguments", "tool_calls", "follow_tools"}

// LLMOptions configure the LLM demos. BaseURL or APIKey must be set: the
// demos call a real OpenAI-compatible model server.
type LLMOptions struct {
	// BaseURL is the model server's API base, e.g. "http://127.0.0.1:8081/v1"
	// ("" means OpenAI's).
	BaseURL string
	// APIKey is the bearer token sent to the model server.
	APIKey string
	// Model is the model id sent to the server (default agent.DefaultModel;
	// the local model server accepts any id).
	Model string
	// API selects Chat Completions (default) or the Responses API.
	API agent.API
	// HTTPClient makes the model requests (default http.DefaultClient's
	// behaviour).
	HTTPClient *http.Client
	// Retry is the agents' retry policy for failed model calls (zero value:
	// agent's defaults).
	Retry agent.RetryPolicy
	// Journal is the journal file; "" reads JournalEnv at each invocation
	// (see Options.Journal).
	Journal string
}

// LLMNames returns the LLM demo model names in a fixed order.
func LLMNames() []string { return []string{WriterReviewer, Tools} }

// LLMWorkflows returns the LLM demo workflows by model name, each with its
// own agents talking to the model server o names.
func LLMWorkflows(o *LLMOptions) (map[string]*workflow.Workflow, error) {
	if o == nil || (o.BaseURL == "" && o.APIKey == "") {
		return nil, errors.New("examples: LLM demos: no model server (LLMOptions.BaseURL and APIKey are empty)")
	}
	iv := invocation{opts: Options{Journal: o.Journal}}
	out := map[string]*workflow.Workflow{}
	var errs []error
	for name, build := range map[string]func(invocation, *LLMOptions) (*workflow.Workflow, error){
		WriterReviewer: writerReviewer, Tools: tools,
	} {
		wf, err := build(iv, o)
		if err != nil {
			errs = append(errs, fmt.Errorf("examples: %s: %w", name, err))
			continue
		}
		out[name] = wf
	}
	return out, errors.Join(errs...)
}

// chatAgent returns a ChatAgent named name on the model server of o.
func chatAgent(o *LLMOptions, name, instructions string, tools ...*agent.Tool) (*agent.ChatAgent, error) {
	return agent.NewChatAgent(&agent.Options{
		Name: name, Model: o.Model, BaseURL: o.BaseURL, APIKey: o.APIKey, HTTPClient: o.HTTPClient, API: o.API,
		Instructions: instructions, Tools: tools, Retry: o.Retry, MetadataFrom: modelMetadata(name),
	})
}

// modelMetadata returns the MetadataFrom of agent name: the request's
// ModelMetadataKeys, per-agent keys first.
func modelMetadata(name string) func(ctx context.Context) map[string]string {
	return func(ctx context.Context) map[string]string {
		md := workflow.InvocationFrom(ctx).Metadata
		out := map[string]string{}
		for _, k := range ModelMetadataKeys {
			if v, ok := md[name+"."+k]; ok {
				out[k] = v
			} else if v, ok := md[k]; ok {
				out[k] = v
			}
		}
		return out
	}
}

// writerReviewer: superstep 1, the writer agent drafts a text on the
// input; superstep 2, the reviewer agent gets ReviewPrompt + the draft and
// replies with the final version. Both stream their tokens and both
// replies are outputs: the draft first, the reviewed text last.
func writerReviewer(iv invocation, o *LLMOptions) (*workflow.Workflow, error) {
	writer, err := chatAgent(o, WriterID, "You are a writer. Write a short first draft, at most five sentences, "+
		"on the topic or request the user gives. Reply with the draft only.")
	if err != nil {
		return nil, err
	}
	reviewer, err := chatAgent(o, ReviewerID, "You are an editor. You are given a draft: fix its mistakes, "+
		"make it clearer and tighter, and reply with the final version only.")
	if err != nil {
		return nil, err
	}
	w := &demoAgent{iv: iv, inner: agent.Executor(WriterID, writer)}
	r := &demoAgent{iv: iv, inner: agent.Executor(ReviewerID, reviewer), prompt: func(draft string) string {
		return ReviewPrompt + draft
	}}
	return workflow.NewBuilder(WriterReviewer).SetStart(w).AddEdge(w, r).Outputs(w, r).Build()
}

// tools: one superstep in which the assistant agent answers the input,
// calling the calculate tool for arithmetic.
func tools(iv invocation, o *LLMOptions) (*workflow.Workflow, error) {
	calc, err := agent.NewTool(CalculateTool, "Computes a op b exactly; use it for every arithmetic operation.",
		func(ctx context.Context, in CalcArgs) (string, error) {
			res, err := in.eval()
			if err != nil {
				return "", err
			}
			return res, iv.journalTool(ctx, AssistantID, CalculateTool)
		})
	if err != nil {
		return nil, err
	}
	a, err := chatAgent(o, AssistantID, "You are a helpful assistant. For any arithmetic, call the "+
		CalculateTool+" tool (one operation per call) instead of computing yourself, then answer briefly.", calc)
	if err != nil {
		return nil, err
	}
	ex := &demoAgent{iv: iv, inner: agent.Executor(AssistantID, a)}
	return workflow.NewBuilder(Tools).SetStart(ex).Outputs(ex).Build()
}

// CalcArgs are the arguments of the calculate tool.
type CalcArgs struct {
	A  float64 `json:"a" description:"the left operand"`
	Op string  `json:"op" description:"the operator: one of + - * /"`
	B  float64 `json:"b" description:"the right operand"`
}

// eval computes the call's result as the shortest decimal that round-trips.
func (c CalcArgs) eval() (string, error) {
	var v float64
	switch c.Op {
	case "+":
		v = c.A + c.B
	case "-":
		v = c.A - c.B
	case "*", "x", "×":
		v = c.A * c.B
	case "/", "÷":
		if c.B == 0 {
			return "", errors.New("division by zero")
		}
		v = c.A / c.B
	default:
		return "", fmt.Errorf("unknown operator %q (want + - * /)", c.Op)
	}
	if math.IsInf(v, 0) || math.IsNaN(v) {
		return "", errors.New("result out of range")
	}
	return strconv.FormatFloat(v, 'g', -1, 64), nil
}

// journalTool appends "<response_id> <superstep> tool:<name> <idempotency
// key> <call id>" for a tool call: the idempotency key is the same when the
// superstep re-runs after a crash, so re-run calls repeat the same line,
// which the crash checker counts as one more attempt of that "executor".
func (iv invocation) journalTool(ctx context.Context, executorID, name string) error {
	key := agent.IdempotencyKey(ctx)
	// The key is "<run id>:<superstep>:<executor id>" (workflow.Context.
	// IdempotencyKey); the tool has no other way to learn its superstep.
	rest, ok := strings.CutSuffix(key, ":"+executorID)
	run, stepText := "", ""
	if i := strings.LastIndexByte(rest, ':'); ok && i >= 0 {
		run, stepText = rest[:i], rest[i+1:]
	}
	step, err := strconv.ParseInt(stepText, 10, 64)
	if err != nil {
		return fmt.Errorf("examples: tool %s: no superstep in idempotency key %q", name, key)
	}
	id := workflow.InvocationFrom(ctx).ID
	if id == "" {
		id = run
	}
	return iv.appendJournal(fmt.Sprintf("%s %d tool:%s %s %s\n", id, step, name, key, agent.ToolCallID(ctx)))
}

// demoAgent runs an agent executor like the other demos' executors: after
// metadata.step_delay_ms, journalled once it succeeded. prompt, when set,
// rewrites a text input before the agent gets it.
type demoAgent struct {
	iv     invocation
	inner  workflow.Executor
	prompt func(string) string
}

var (
	_ workflow.InputTyper = (*demoAgent)(nil)
	_ workflow.Retrier    = (*demoAgent)(nil)
)

// ID returns the agent executor's id.
func (d *demoAgent) ID() string { return d.inner.ID() }

// Handle runs the agent's turn for msg.
func (d *demoAgent) Handle(c *workflow.Context, msg any) error {
	if s, ok := msg.(string); ok && d.prompt != nil {
		msg = d.prompt(s)
	}
	return d.iv.run(c, func() error { return d.inner.Handle(c, msg) })
}

// InputTypes are the agent executor's.
func (d *demoAgent) InputTypes() []reflect.Type {
	if it, ok := d.inner.(workflow.InputTyper); ok {
		return it.InputTypes()
	}
	return []reflect.Type{reflect.TypeFor[string]()}
}

// Retry is the agent executor's retry policy.
func (d *demoAgent) Retry() workflow.RetryPolicy {
	if r, ok := d.inner.(workflow.Retrier); ok {
		return r.Retry()
	}
	return workflow.RetryPolicy{}
}
