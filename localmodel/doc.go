// Package localmodel is a deterministic, OpenAI-compatible model server for
// tests and offline demos. It is a TEST DOUBLE, not a language model: it
// echoes or replays scripted text and tool calls, token by token, so that
// agents, workflows and streams can be exercised without a network or an
// API key, with identical output on every run.
//
// NewHandler returns an http.Handler serving
//
//	POST /v1/chat/completions   Chat Completions, streaming and not
//	POST /v1/responses          Responses API, streaming and not
//	GET  /v1/models             the configured model ids
//
// (also without the /v1 prefix). Mount it under any base URL and point an
// OpenAI client at it (openai-go: option.WithBaseURL(url + "/v1")).
//
// # The script
//
// Each request is answered from its last message, its function tools
// (tools of other types are ignored), its tool_choice and its metadata
// (the request's "metadata" object, string values). The reply is a call of
// one tool (call id "call_<n>", n counting the request's tool calls) or a
// text:
//
//   - tool_choice "none": never a call.
//   - tool_choice naming a function ({"type":"function","name":...} or
//     {"type":"function","function":{"name":...}}): a call of that tool,
//     whatever the last message (as with a real model, a client that
//     loops on tool calls must drop the tool_choice after the first one).
//   - tool_choice "required": a call, whatever the last message, of the
//     tool metadata "tool_call" names or the last user message mentions,
//     else of the first tool offered.
//   - tool_choice "auto" or none given: a call if fewer than metadata
//     "tool_calls" (default 1) tool results follow the last user message,
//     of the tool metadata "tool_call" names, else of the first tool the
//     last user message mentions by name, else, with metadata
//     "follow_tools" = "true" (or Options.FollowTools), of the first tool
//     offered. follow_tools is
//     opt-in, so that an unscripted message offered tools is echoed as it
//     always was: with it, a request offering tools gets a call of the
//     first one, then, once the result is in, a text reply.
//
// A call's arguments are metadata "tool_arguments"; else, when metadata
// "tool_call" names the tool or the last user message mentions it, the
// first JSON object in that message; else a deterministic minimal value
// valid for the tool's parameters schema: its required properties only,
// strings "x" (or a value of their format), numbers and integers 1 moved
// into their bounds, booleans true, enums their first value, arrays of
// minItems items, objects recursively; "{}" for a schema that is not an
// object schema. A tool_choice that names a tool the request does not
// offer, "required" without function tools, or a tool_choice type other
// than function is answered with status 400.
//
// Otherwise the reply is a text: if the last message is a tool result
// (role "tool", or a function_call_output item), "Tool <name> returned:
// <output>"; else metadata "reply", or Options.Reply(last user text), or
// by default "Echo: <last user text>".
//
// Text is split into tokens at spaces (a token is a word with its leading
// space). One token is written every token_delay_ms milliseconds (metadata
// "token_delay_ms", else Options.TokenDelay, else 20 ms; 0 is allowed).
// With max_tokens / max_completion_tokens / max_output_tokens set, the reply
// stops after that many tokens with finish_reason "length" (Responses:
// status "incomplete", reason "max_output_tokens"). Metadata
// "finish_reason" = "length" or "content_filter" forces that finish reason
// after the whole reply. Usage counts tokens the same way: prompt tokens
// over every message's text, completion tokens over what was written.
//
// A request whose prompt tokens exceed its context window (metadata
// "context_tokens", else Options.ContextTokens; none by default) is
// refused as OpenAI refuses it: status 400, error code
// "context_length_exceeded", a message naming both counts.
package localmodel
