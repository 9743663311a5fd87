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
// Each request is answered from its last message and its metadata (the
// request's "metadata" object, string values):
//
//   - If metadata "tool_call" names one of the request's tools, or the last
//     user message mentions one of the tools by name, and fewer than
//     metadata "tool_calls" (default 1) tool results follow that user
//     message, the reply is a call of that tool (call id "call_<n>", n
//     counting the request's tool calls) whose arguments are metadata
//     "tool_arguments", or the first JSON object in the user message, or "{}".
//   - Otherwise, if the last message is a tool result (role "tool", or a
//     function_call_output item), the reply is "Tool <name> returned: <output>".
//   - Otherwise the reply is metadata "reply", or Options.Reply(last user
//     text), or by default "Echo: <last user text>".
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
package localmodel
