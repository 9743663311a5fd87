// Package examples holds the demo workflows that `superstep serve` hosts out
// of the box (and, with a model server, the LLM demos below): demo.echo, demo.two-outputs, demo.silent, demo.approval,
// demo.fanout and demo.stream (which emits its words as live text deltas,
// published as they come with metadata.publication=live). Each accepts request metadata step_delay_ms (a sleep inside
// every executor invocation) and, when SUPERSTEP_DEMO_JOURNAL names a file,
// appends one line "<response_id> <superstep> <executor_id>" per executor
// invocation to it (O_APPEND, fsync) after its work and before returning:
// an external side effect crash tests count.
//
// Metadata: demo.silent reads steps (default 5, capped at the host's
// superstep limit minus one), demo.fanout workers (default 4, 1..64; other
// values fail the run).
//
// # LLM demos
//
// RegisterLLM hosts three demos built of agent.ChatAgents on an
// OpenAI-compatible model server (LLMOptions; `superstep serve` registers
// them only when --model-server, OPENAI_BASE_URL or OPENAI_API_KEY names
// one; --model-server local starts the deterministic localmodel server in
// process):
//
//   - demo.writer-reviewer: superstep 1, the "writer" agent drafts a text
//     on the input; superstep 2, the "reviewer" agent gets ReviewPrompt +
//     the draft and replies with the final version. Both replies are
//     outputs, the reviewer's last.
//   - demo.tools: the "assistant" agent answers in one superstep, calling
//     its calculate tool (CalcArgs: a op b, exact) as it needs; each call is
//     an mcp_call output item (name, arguments, output) before
//     the answer: the server ran it, so no client answers it.
//   - demo.orchestra: agent.Concurrent of four agents (analyst, planner,
//     critic, scribe), each with its own calculate tool, run at once in one
//     superstep, then their joined answer (the journal's crash tests use
//     it for several executors in one superstep).
//
// All are registered with live publication (tokens are published as they
// stream; metadata.publication=committed overrides it), honour
// step_delay_ms and journal every agent invocation like the other demos.
// The calculate tool also journals each call as
// "<response_id> <superstep> tool:calculate <idempotency_key> <call_id>";
// the idempotency key (agent.IdempotencyKey) is the same when a superstep
// re-runs after a crash. The request metadata keys ModelMetadataKeys
// (token_delay_ms, reply, finish_reason, tool_call, tool_arguments,
// tool_calls, follow_tools; "<agent>.<key>", e.g. "reviewer.reply", for
// one agent only)
// are passed on to the model server, where they script the local model;
// with it the output is deterministic: for input X the writer replies
// "Echo: X" and the reviewer "Echo: " + ReviewPrompt + "Echo: X".
package examples
